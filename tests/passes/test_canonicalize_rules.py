"""Algebraic and structural rules of canonicalize, text in / text out."""
from __future__ import annotations

import pytest
from passes_test_utils import by_name, check, parse

from tegula.ir.verifier import verify
from tegula.passes import canonicalize
from tegula.passes.ir_utils import constant_of


def stored_value(body: str, t: str, rt: str = ""):
    """Canonicalize `body` (which defines %r of type `rt` (default `t`) from %x, %y of
    type t and %b: i1) and return what is stored: the name of an argument, ('const',
    literal), or the op still computing it."""
    k = parse(f"""
        kernel @k(%x: {t}, %y: {t}, %b: i1, %out: ptr<{rt or t}>) {{
          {body}
          store %out, %r {{}}
          return
        }}""".replace("\n          ", "\n"))
    canonicalize(k)
    verify(k)
    v = k.body.instrs[-2].operands[1]
    if v in k.args:
        return v.name
    lit = constant_of(v)
    return ("const", lit) if lit is not None else v.owner.op.value


RULES = [
    # integers
    ("i32", "%c = constant {value = 0} : i32\n%r = add %x, %c : i32", "x"),
    ("i32", "%c = constant {value = 0} : i32\n%r = add %c, %x : i32", "x"),
    ("i32", "%c = constant {value = 0} : i32\n%r = sub %x, %c : i32", "x"),
    ("i32", "%r = sub %x, %x : i32", ("const", 0)),
    ("i32", "%c = constant {value = 1} : i32\n%r = mul %c, %x : i32", "x"),
    ("i32", "%c = constant {value = 0} : i32\n%r = mul %x, %c : i32", ("const", 0)),
    ("i32", "%c = constant {value = 1} : i32\n%r = idiv %x, %c : i32", "x"),
    ("i32", "%c = constant {value = -1} : i32\n%r = rem %x, %c : i32", ("const", 0)),
    ("i32", "%r = and %x, %x : i32", "x"),
    ("i32", "%c = constant {value = -1} : i32\n%r = and %x, %c : i32", "x"),
    ("u32", "%c = constant {value = 4294967295} : u32\n%r = and %c, %x : u32", "x"),
    ("i32", "%c = constant {value = 0} : i32\n%r = and %x, %c : i32", ("const", 0)),
    ("i32", "%r = or %x, %x : i32", "x"),
    ("i32", "%c = constant {value = 0} : i32\n%r = or %c, %x : i32", "x"),
    ("i32", "%c = constant {value = 0} : i32\n%r = xor %x, %c : i32", "x"),
    ("i32", "%r = xor %x, %x : i32", ("const", 0)),
    ("i32", "%c = constant {value = 0} : i32\n%r = shl %x, %c : i32", "x"),
    ("i32", "%c = constant {value = 0} : i32\n%r = shr %x, %c : i32", "x"),
    ("i32", "%n = neg %x : i32\n%r = neg %n : i32", "x"),
    ("i32", "%n = not %x : i32\n%r = not %n : i32", "x"),
    ("i32", "%r = maximum %x, %x {propagate_nan = False} : i32", "x"),
    ("i32", "%r = cast %x {rounding = 'rtne'} : i32", "x"),
    ("i32", "%r = bitcast %x : i32", "x"),
    ("i32", "%r = select %b, %x, %x : i32", "x"),
    ("i32", "%t = constant {value = True} : i1\n%r = select %t, %x, %y : i32", "x"),
    ("i32", "%t = constant {value = False} : i1\n%r = select %t, %x, %y : i32", "y"),
    ("i1", "%t = constant {value = True} : i1\n%f = constant {value = False} : i1\n"
           "%r = select %b, %t, %f : i1", "b"),
    ("i32:i1", "%r = le %x, %x : i1", ("const", True)),
    ("i32:i1", "%r = ne %x, %x : i1", ("const", False)),
    # floats: only the identities exact for NaN, infinities and signed zeros
    ("f32", "%c = constant {value = 1.0} : f32\n%r = mul %x, %c : f32", "x"),
    ("f32", "%c = constant {value = -0.0} : f32\n%r = add %c, %x : f32", "x"),
    ("f32", "%c = constant {value = 0.0} : f32\n%r = sub %x, %c : f32", "x"),
    ("f32", "%c = constant {value = 1.0} : f32\n%r = div %x, %c : f32", "x"),
    ("f32", "%n = neg %x : f32\n%r = neg %n : f32", "x"),
]

NOT_APPLIED = [
    ("f32", "%c = constant {value = 0.0} : f32\n%r = add %x, %c : f32", "add"),     # -0 + 0 = +0
    ("f32", "%c = constant {value = 0.0} : f32\n%r = mul %x, %c : f32", "mul"),     # nan * 0 = nan
    ("f32", "%r = sub %x, %x : f32", "sub"),                                          # inf - inf
    ("f32", "%c = constant {value = -0.0} : f32\n%r = sub %x, %c : f32", "sub"),    # -0 - -0 = +0
    ("f32:i1", "%r = eq %x, %x : i1", "eq"),                                        # nan != nan
]


def _types(t: str) -> tuple[str, str]:
    arg, _, result = t.partition(":")
    return arg, result


@pytest.mark.parametrize("t,body,expected", RULES, ids=[r[1].split("\n")[-1] for r in RULES])
def test_rule(t, body, expected):
    assert stored_value(body, *_types(t)) == expected


@pytest.mark.parametrize("t,body,expected", NOT_APPLIED, ids=[r[1].split("\n")[-1] for r in NOT_APPLIED])
def test_float_rules_that_would_change_nan_or_signed_zero_are_not_applied(t, body, expected):
    assert stored_value(body, *_types(t)) == expected


def test_float_self_comparison_is_not_folded():
    k = parse("""
        kernel @k(%x: f32, %out: ptr<i1>) {
          %r = eq %x, %x : i1
          store %out, %r {}
          return
        }""")
    canonicalize(k)
    assert k.body.instrs[-2].operands[1].owner.op.value == "eq"


def test_addptr_zero_and_shape_identities():
    check("""
        kernel @k(%p: ptr<f32>, %v: tile<4x8xf32>) {
          %z = constant {value = 0} : tile<4x8xi32>
          %ps = splat %p : tile<4x8xptr<f32>>
          %q = addptr %ps, %z : tile<4x8xptr<f32>>
          %b = broadcast %v {shape = (4, 8)} : tile<4x8xf32>
          %r = reshape %b {shape = (4, 8)} : tile<4x8xf32>
          %t = permute %r {order = (1, 0)} : tile<8x4xf32>
          %u = permute %t {order = (1, 0)} : tile<4x8xf32>
          store %q, %u {}
          return
        }""", ["canonicalize", "dce"], """
        kernel @k(%p: ptr<f32>, %v: tile<4x8xf32>) {
          %ps = splat %p : tile<4x8xptr<f32>>
          store %ps, %v {}
          return
        }""")


def test_broadcast_and_expand_dims_of_splat_become_splat():
    check("""
        kernel @k(%x: f32, %p: tile<4x8xptr<f32>>) {
          %s = splat %x : tile<8xf32>
          %e = expand_dims %s {axis = 0} : tile<1x8xf32>
          %b = broadcast %e {shape = (4, 8)} : tile<4x8xf32>
          store %p, %b {}
          return
        }""", ["canonicalize", "dce"], """
        kernel @k(%x: f32, %p: tile<4x8xptr<f32>>) {
          %b = splat %x : tile<4x8xf32>
          store %p, %b {}
          return
        }""")


def test_if_with_constant_condition_inlines_taken_region():
    check("""
        kernel @k(%x: i32, %out: ptr<i32>) {
          %t = constant {value = True} : i1
          %r = if %t : i1 -> i32 {
            %a = add %x, %x : i32
            store %out, %a {}
            yield %a
          } {
            yield %x
          }
          store %out, %r {}
          return
        }""", ["canonicalize"], """
        kernel @k(%x: i32, %out: ptr<i32>) {
          %t = constant {value = True} : i1
          %a = add %x, %x : i32
          store %out, %a {}
          store %out, %a {}
          return
        }""")


def test_if_with_false_condition_keeps_else_region():
    check("""
        kernel @k(%x: i32, %out: ptr<i32>) {
          %c0 = constant {value = 0} : i32
          %c1 = constant {value = 1} : i32
          %f = gt %c0, %c1 : i1
          %r = if %f : i1 -> i32 {
            yield %c0
          } {
            %m = mul %x, %c1 : i32
            yield %m
          }
          store %out, %r {}
          return
        }""", ["canonicalize", "dce"], """
        kernel @k(%x: i32, %out: ptr<i32>) {
          store %out, %x {}
          return
        }""")


def test_if_yielding_same_values_in_both_regions_goes():
    check("""
        kernel @k(%c: i1, %x: i32, %out: ptr<i32>) {
          %r = if %c : i1 -> i32 {
            yield %x
          } {
            yield %x
          }
          store %out, %r {}
          return
        }""", ["canonicalize"], """
        kernel @k(%c: i1, %x: i32, %out: ptr<i32>) {
          store %out, %x {}
          return
        }""")


LOOP = """
    kernel @k(%n: i32, %x: f32, %out: ptr<f32>) {{
      %lb = constant {{value = {lb}}} : i32
      %ub = constant {{value = {ub}}} : i32
      %st = constant {{value = 1}} : i32
      %r = for %lb, %ub, %st, %x : i32, i32, i32, f32 -> f32 {{
      ^(%i: i32, %acc: f32):
        %a = add %acc, %acc : f32
        store %out, %a {{}}
        yield %a
      }}
      store %out, %r {{}}
      return
    }}"""


def test_for_with_zero_trip_count_is_removed():
    check(LOOP.format(lb=4, ub=4), ["canonicalize", "dce"], """
        kernel @k(%n: i32, %x: f32, %out: ptr<f32>) {
          store %out, %x {}
          return
        }""")


def test_for_with_iterations_is_kept():
    k = parse(LOOP.format(lb=0, ub=4))
    canonicalize(k)
    assert [i.op.value for i in k.body.instrs].count("for") == 1


def test_for_with_one_iteration_is_inlined():
    """The body runs once in place of the loop: its carried value is the initial one,
    the loop's result what it yields (fla's loops over cdiv(K, BK) with BK = K)."""
    check(LOOP.format(lb=3, ub=4), ["canonicalize", "dce"], """
        kernel @k(%n: i32, %x: f32, %out: ptr<f32>) {
          %a = add %x, %x : f32
          store %out, %a {}
          store %out, %a {}
          return
        }""")


@pytest.mark.parametrize("lb, ub, step, inlined", [(0, 64, 64, True), (0, 65, 64, False), (5, 4, -1, True),
                                                   (5, 3, -1, False), (0, 1, 2, True)])
def test_one_trip_of_any_step_is_inlined_and_uses_the_lower_bound(lb, ub, step, inlined):
    k = parse(f"""
        kernel @k(%out: ptr<i32>) {{
          %lb = constant {{value = {lb}}} : i32
          %ub = constant {{value = {ub}}} : i32
          %st = constant {{value = {step}}} : i32
          for %lb, %ub, %st : i32, i32, i32 {{
          ^(%i: i32):
            store %out, %i {{}}
            yield
          }}
          return
        }}""")
    canonicalize(k)
    verify(k)
    loops = [i for i in k.body.instrs if i.op.value == "for"]
    assert len(loops) == (0 if inlined else 1)
    if inlined:
        store = next(i for i in k.body.instrs if i.op.value == "store")
        assert constant_of(store.operands[1]) == lb


@pytest.mark.parametrize("yielded", ["%inv", "%x"], ids=["unchanged", "its_initial_value"])
def test_loop_carried_value_yielded_unchanged_or_its_init_is_dropped(yielded):
    """The body yields the carried value back, or the value the loop started with
    (defined outside it): every iteration sees the initial value, and so does the code
    after the loop."""
    check(f"""
        kernel @k(%n: i32, %x: f32, %y: f32, %out: ptr<f32>) {{
          %lb = constant {{value = 0}} : i32
          %st = constant {{value = 1}} : i32
          %r, %s = for %lb, %n, %st, %x, %y : i32, i32, i32, f32, f32 -> f32, f32 {{
          ^(%i: i32, %inv: f32, %acc: f32):
            %a = add %acc, %inv : f32
            yield {yielded}, %a
          }}
          %t = add %r, %s : f32
          store %out, %t {{}}
          return
        }}""", ["canonicalize"], """
        kernel @k(%n: i32, %x: f32, %y: f32, %out: ptr<f32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %s = for %lb, %n, %st, %y : i32, i32, i32, f32 -> f32 {
          ^(%i: i32, %acc: f32):
            %a = add %acc, %x : f32
            yield %a
          }
          %t = add %x, %s : f32
          store %out, %t {}
          return
        }""")


def test_a_range_reassigned_in_the_loop_is_not_carried():
    """fla's `o_k1 = tl.arange(0, 64)` re-assigned in the body of the loop that reads it:
    after tir_opt (LICM hoists the copy onto the first) the loop carries
    nothing but its accumulator, so the pipeliner can run its loads ahead."""
    import tegula
    import tegula.language as tl
    from tegula.compiler import ASTSource
    from tegula.ir.ops import Op
    from tegula.runtime.compiler import optimized_ir

    @tegula.jit
    def reassigned(x_ptr, out_ptr, N, B: tl.constexpr):
        o = tl.arange(0, B)
        acc = tl.zeros([B], dtype=tl.float32)
        for i in range(N):
            acc += tl.load(x_ptr + i * B + o)
            o = tl.arange(0, B)
        tl.store(out_ptr + o, acc)

    kernel = optimized_ir(ASTSource(reassigned, {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32",
                                                 "B": "constexpr"}, {"B": 32}))
    loop = next(i for i in kernel.walk() if i.op is Op.FOR)
    assert len(loop.results) == 1


def test_canonicalize_preserves_side_effect_order_and_names():
    k = parse("""
        kernel @k(%x: i32, %out: ptr<i32>) {
          %c = constant {value = 0} : i32
          %r = add %x, %c : i32
          store %out, %r {}
          store %out, %x {}
          return
        }""")
    canonicalize(k)
    stores = [i for i in k.body.instrs if i.op.value == "store"]
    assert [s.operands[1] for s in stores] == [by_name(k, "x"), by_name(k, "x")]


@pytest.mark.parametrize("cmp, c, lb, ub, step, decided", [
    ("ge", 0, 0, "%n", 1, True),      # fla's `if i_k >= 0:` in a loop from 0
    ("lt", 0, 0, "%n", 1, False),
    ("gt", 0, 0, "%n", 1, None),      # the first iteration is 0
    ("lt", 8, 0, 8, 2, True),         # 0, 2, 4, 6
    ("le", 5, 0, 8, 2, None),
    ("ge", 7, 0, 8, 2, False),
    ("eq", 3, 0, 8, 2, None),         # (a range, not a stride: odd values are not decided)
    ("ne", 9, 0, 8, 2, True),
    ("gt", 2, 8, 2, -2, True),        # 8, 6, 4: down to 4
    ("lt", 4, 8, 2, -2, False),
    ("ge", 3, "%n", 8, 1, None),      # no lower bound known
    ("lt", 8, "%n", 8, 1, True),      # but the values stay below 8
])
def test_induction_variable_comparisons_decided_by_its_range(cmp, c, lb, ub, step, decided):
    def bound(name, v):
        return "" if isinstance(v, str) else f"%{name} = constant {{value = {v}}} : i32\n"
    k = parse(f"""
        kernel @k(%n: i32, %out: ptr<i1>) {{
          {bound('lb', lb)}{bound('ub', ub)}%st = constant {{value = {step}}} : i32
          %c = constant {{value = {c}}} : i32
          for {lb if isinstance(lb, str) else '%lb'}, {ub if isinstance(ub, str) else '%ub'}, %st : i32, i32, i32 {{
          ^(%i: i32):
            %r = {cmp} %i, %c : i1
            store %out, %r {{}}
            yield
          }}
          return
        }}""")
    canonicalize(k)
    verify(k)
    loop = next(i for i in k.body.instrs if i.op.value == "for")
    store = next(i for i in loop.regions[0].instrs if i.op.value == "store")
    got = constant_of(store.operands[1])
    assert (None if got is None else bool(got)) == decided
