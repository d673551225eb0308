"""carried_ranges: an index tile a loop only shifts by a scalar (FlexAttention's
`offs_n = offs_n + offset`) is carried as that scalar and rebuilt from its constant
pattern where the body and the code after the loop read it; tiles that are not a
pattern plus a scalar, or not shifted by a splat, stay carried."""
from __future__ import annotations

from passes_test_utils import check, run

PASSES = ["carried_ranges", "dce"]


def test_shifted_range_becomes_a_carried_scalar_rebuilt_in_and_after_the_loop():
    check("""
        kernel @k(%a: i32, %n: i32, %p: ptr<i32>, %q: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = arange {start = 0, end = 8} : tile<8xi32>
          %s = splat %a : tile<8xi32>
          %o = add %s, %r : tile<8xi32>
          %res = for %lb, %n, %st, %o : i32, i32, i32, tile<8xi32> -> tile<8xi32> {
          ^(%i: i32, %offs: tile<8xi32>):
            %pp = splat %p : tile<8xptr<i32>>
            %ptrs = addptr %pp, %offs : tile<8xptr<i32>>
            store %ptrs, %offs {}
            %step = load %q {} : i32
            %sp = splat %step : tile<8xi32>
            %nx = add %offs, %sp : tile<8xi32>
            yield %nx
          }
          %pp2 = splat %p : tile<8xptr<i32>>
          store %pp2, %res {}
          return
        }""", PASSES, """
        kernel @k(%a: i32, %n: i32, %p: ptr<i32>, %q: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %res = for %lb, %n, %st, %a : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %c: i32):
            %cs = splat %c : tile<8xi32>
            %r = arange {start = 0, end = 8} : tile<8xi32>
            %offs = add %r, %cs : tile<8xi32>
            %pp = splat %p : tile<8xptr<i32>>
            %ptrs = addptr %pp, %offs : tile<8xptr<i32>>
            store %ptrs, %offs {}
            %step = load %q {} : i32
            %nx = add %c, %step : i32
            yield %nx
          }
          %rs = splat %res : tile<8xi32>
          %r2 = arange {start = 0, end = 8} : tile<8xi32>
          %final = add %r2, %rs : tile<8xi32>
          %pp2 = splat %p : tile<8xptr<i32>>
          store %pp2, %final {}
          return
        }""")


def test_a_scalar_the_loop_shifts_by_the_same_step_is_reused():
    # FlexAttention carries `kv_offset += offset` beside `offs_n += offset`: the tile is
    # rebuilt from that scalar (plus the difference of the initial values), nothing is added
    check("""
        kernel @k(%a: i32, %b: i32, %n: i32, %p: ptr<i32>, %q: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = arange {start = 0, end = 8} : tile<8xi32>
          %s = splat %a : tile<8xi32>
          %o = add %r, %s : tile<8xi32>
          %res, %kf = for %lb, %n, %st, %o, %b : i32, i32, i32, tile<8xi32>, i32 -> tile<8xi32>, i32 {
          ^(%i: i32, %offs: tile<8xi32>, %k: i32):
            %pp = splat %p : tile<8xptr<i32>>
            %ptrs = addptr %pp, %offs : tile<8xptr<i32>>
            store %ptrs, %offs {}
            %step = load %q {} : i32
            %sp = splat %step : tile<8xi32>
            %nx = add %sp, %offs : tile<8xi32>
            %k2 = add %k, %step : i32
            yield %nx, %k2
          }
          store %q, %kf {}
          return
        }""", PASSES, """
        kernel @k(%a: i32, %b: i32, %n: i32, %p: ptr<i32>, %q: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %d = sub %a, %b : i32
          %res = for %lb, %n, %st, %b : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %k: i32):
            %c = add %k, %d : i32
            %cs = splat %c : tile<8xi32>
            %r = arange {start = 0, end = 8} : tile<8xi32>
            %offs = add %r, %cs : tile<8xi32>
            %pp = splat %p : tile<8xptr<i32>>
            %ptrs = addptr %pp, %offs : tile<8xptr<i32>>
            store %ptrs, %offs {}
            %step = load %q {} : i32
            %k2 = add %k, %step : i32
            yield %k2
          }
          store %q, %res {}
          return
        }""")


def test_shape_ops_subtracted_steps_and_splats_on_the_right_keep_the_pattern():
    # offs = (a - arange)[None, :] broadcast to 4x8, shifted down by s each iteration
    check("""
        kernel @k(%a: i32, %s: i32, %n: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = arange {start = 0, end = 8} : tile<8xi32>
          %sa = splat %a : tile<8xi32>
          %o = sub %sa, %r : tile<8xi32>
          %e = expand_dims %o {axis = 0} : tile<1x8xi32>
          %bc = broadcast %e {shape = (4, 8)} : tile<4x8xi32>
          %res = for %lb, %n, %st, %bc : i32, i32, i32, tile<4x8xi32> -> tile<4x8xi32> {
          ^(%i: i32, %offs: tile<4x8xi32>):
            %pp = splat %p : tile<4x8xptr<i32>>
            store %pp, %offs {}
            %sp = splat %s : tile<4x8xi32>
            %nx = sub %offs, %sp : tile<4x8xi32>
            yield %nx
          }
          return
        }""", PASSES, """
        kernel @k(%a: i32, %s: i32, %n: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %res = for %lb, %n, %st, %a : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %c: i32):
            %cs = splat %c : tile<4x8xi32>
            %zero = constant {value = 0} : tile<8xi32>
            %r = arange {start = 0, end = 8} : tile<8xi32>
            %neg = sub %zero, %r : tile<8xi32>
            %e = expand_dims %neg {axis = 0} : tile<1x8xi32>
            %bc = broadcast %e {shape = (4, 8)} : tile<4x8xi32>
            %offs = add %bc, %cs : tile<4x8xi32>
            %pp = splat %p : tile<4x8xptr<i32>>
            store %pp, %offs {}
            %nx = sub %c, %s : i32
            yield %nx
          }
          return
        }""")


def test_a_uniform_tile_is_carried_as_its_scalar():
    out = run("""
        kernel @k(%a: i32, %n: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %s = splat %a : tile<8xi32>
          %res = for %lb, %n, %st, %s : i32, i32, i32, tile<8xi32> -> tile<8xi32> {
          ^(%i: i32, %u: tile<8xi32>):
            %pp = splat %p : tile<8xptr<i32>>
            store %pp, %u {}
            %iv = splat %i : tile<8xi32>
            %nx = add %u, %iv : tile<8xi32>
            yield %nx
          }
          return
        }""", PASSES)
    assert "-> i32 {" in out and "arange" not in out, out


_NOT_REWRITTEN = {
    # the step is a tile, not a splat
    "tile step": ("%r = arange {start = 0, end = 8} : tile<8xi32>", "tile<8xi32>",
                  "%nx = add %t, %r : tile<8xi32>"),
    # the initial value comes from memory: rebuilding it would keep it live anyway
    "loaded init": ("%pp0 = splat %p : tile<8xptr<i32>>\n%r = load %pp0 {} : tile<8xi32>", "tile<8xi32>",
                    "%sp = splat %a : tile<8xi32>\n%nx = add %t, %sp : tile<8xi32>"),
    # a product with the carried tile is not a shift
    "scaled": ("%r = arange {start = 0, end = 8} : tile<8xi32>", "tile<8xi32>",
               "%sp = splat %a : tile<8xi32>\n%nx = mul %t, %sp : tile<8xi32>"),
    # splat(s) - t negates the tile each iteration
    "reflected": ("%r = arange {start = 0, end = 8} : tile<8xi32>", "tile<8xi32>",
                  "%sp = splat %a : tile<8xi32>\n%nx = sub %sp, %t : tile<8xi32>"),
}


def test_tiles_that_are_not_a_pattern_shifted_by_a_splat_stay_carried():
    for name, (init, t, update) in _NOT_REWRITTEN.items():
        text = f"""
            kernel @k(%a: i32, %n: i32, %p: ptr<i32>) {{
              %lb = constant {{value = 0}} : i32
              %st = constant {{value = 1}} : i32
              {init}
              %res = for %lb, %n, %st, %r : i32, i32, i32, {t} -> {t} {{
              ^(%i: i32, %t: {t}):
                %pp = splat %p : tile<8xptr<i32>>
                store %pp, %t {{}}
                {update}
                yield %nx
              }}
              return
            }}"""
        assert f"-> {t} {{" in run(text, PASSES), name


def test_pointer_tiles_stay_carried():
    # `a_ptrs += BLOCK_K * stride`: the pipeliner and the address analyses read carried
    # pointers as they are
    out = run("""
        kernel @k(%a: i32, %n: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = arange {start = 0, end = 8} : tile<8xi32>
          %pp = splat %p : tile<8xptr<i32>>
          %ptrs = addptr %pp, %r : tile<8xptr<i32>>
          %res = for %lb, %n, %st, %ptrs : i32, i32, i32, tile<8xptr<i32>> -> tile<8xptr<i32>> {
          ^(%i: i32, %t: tile<8xptr<i32>>):
            store %t, %r {}
            %sp = splat %a : tile<8xi32>
            %nx = addptr %t, %sp : tile<8xptr<i32>>
            yield %nx
          }
          return
        }""", PASSES)
    assert "-> tile<8xptr<i32>> {" in out, out


def test_an_inner_loop_starting_from_the_outer_loops_tile_is_rewritten_too():
    # outer loops go first: the inner loop's initial value is then the outer's rebuilt
    # tile, a pattern plus the outer's scalar
    out = run("""
        kernel @k(%a: i32, %n: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = arange {start = 0, end = 8} : tile<8xi32>
          %s = splat %a : tile<8xi32>
          %o = add %r, %s : tile<8xi32>
          %res = for %lb, %n, %st, %o : i32, i32, i32, tile<8xi32> -> tile<8xi32> {
          ^(%i: i32, %outer: tile<8xi32>):
            %in = for %lb, %n, %st, %outer : i32, i32, i32, tile<8xi32> -> tile<8xi32> {
            ^(%j: i32, %inner: tile<8xi32>):
              %pp = splat %p : tile<8xptr<i32>>
              store %pp, %inner {}
              %sj = splat %j : tile<8xi32>
              %nj = add %inner, %sj : tile<8xi32>
              yield %nj
            }
            %pq = splat %p : tile<8xptr<i32>>
            store %pq, %in {}
            %si = splat %i : tile<8xi32>
            %ni = add %outer, %si : tile<8xi32>
            yield %ni
          }
          return
        }""", PASSES)
    assert "tile<8xi32> ->" not in out and "-> tile" not in out, out
