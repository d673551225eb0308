"""Axis analysis on the canonical indexing patterns, plus a brute-force soundness check
of the facts against concrete values for the rules with subtle cases."""
from __future__ import annotations

import numpy as np
import pytest
from passes_test_utils import by_name, parse

from tegula.ir.ops import OP_INFO, Op
from tegula.passes import AxisInfo, axis_info, contiguity_order, vector_width

VECTOR_ADD = """
    kernel @k(%x: ptr<f32> {divisibility = 16}, %n: i32 {divisibility = 16}, %m: i32) {
      %pid = program_id {axis = 0} : i32
      %block = constant {value = 128} : i32
      %start = mul %pid, %block : i32
      %range = arange {start = 0, end = 128} : tile<128xi32>
      %starts = splat %start : tile<128xi32>
      %offs = add %starts, %range : tile<128xi32>
      %xs = splat %x : tile<128xptr<f32>>
      %ptrs = addptr %xs, %offs : tile<128xptr<f32>>
      %ns = splat %n : tile<128xi32>
      %mask = lt %offs, %ns : tile<128xi1>
      %ms = splat %m : tile<128xi32>
      %mask2 = lt %offs, %ms : tile<128xi1>
      %v = load %ptrs, %mask {has_mask = True} : tile<128xf32>
      store %ptrs, %v, %mask {has_mask = True}
      store %ptrs, %v, %mask2 {has_mask = True}
      store %ptrs, %v {}
      return
    }"""


def analyse(text):
    k = parse(text)
    info = axis_info(k)
    return k, info, lambda name: info[by_name(k, name)]


def test_program_offsets():
    k, info, at = analyse(VECTOR_ADD)
    assert at("start").divisibility == (128,) and at("start").nonnegative
    offs = at("offs")
    assert offs.contiguity == (128,) and offs.divisibility == (128,) and offs.constancy == (1,)
    assert offs.nonnegative


def test_pointer_divisibility_is_in_bytes():
    _, _, at = analyse(VECTOR_ADD)
    # x is 16-byte aligned; offsets' block starts are multiples of 128 elements = 512 B
    assert at("ptrs").divisibility == (16,)
    assert at("ptrs").contiguity == (128,)
    assert at("xs").constancy == (128,)


def test_mask_constancy_follows_bound_divisibility():
    _, _, at = analyse(VECTOR_ADD)
    assert at("mask").constancy == (16,)   # n is a multiple of 16
    assert at("mask2").constancy == (1,)   # m may be anything


def test_vector_width_for_loads_and_stores():
    k, info, _ = analyse(VECTOR_ADD)
    stores = [i for i in k.walk() if i.op.value == "store"]
    widths = [vector_width(s.operands[0], s.operands[2] if len(s.operands) > 2 else None, info)
              for s in stores]
    assert widths == [4, 1, 4]   # 16 bytes of f32; unaligned bound; no mask


def test_2d_row_col_offsets():
    _, info, at = analyse("""
        kernel @k(%a: ptr<f16> {divisibility = 16}, %stride: i32 {divisibility = 16}) {
          %rm = arange {start = 0, end = 64} : tile<64xi32>
          %rn = arange {start = 0, end = 32} : tile<32xi32>
          %om = expand_dims %rm {axis = 1} : tile<64x1xi32>
          %ss = splat %stride : tile<64x1xi32>
          %rows = mul %om, %ss : tile<64x1xi32>
          %on = expand_dims %rn {axis = 0} : tile<1x32xi32>
          %rowsb = broadcast %rows {shape = (64, 32)} : tile<64x32xi32>
          %onb = broadcast %on {shape = (64, 32)} : tile<64x32xi32>
          %offs = add %rowsb, %onb : tile<64x32xi32>
          %as = splat %a : tile<64x32xptr<f16>>
          %ptrs = addptr %as, %offs : tile<64x32xptr<f16>>
          %v = load %ptrs {} : tile<64x32xf16>
          return
        }""")
    assert at("rows").divisibility == (16, 16) and at("rows").contiguity == (1, 1)
    offs = at("offs")
    assert offs.contiguity == (1, 32) and offs.constancy == (1, 1)
    assert offs.divisibility[1] == 16          # row starts: multiples of the stride
    ptrs = at("ptrs")
    assert ptrs.contiguity == (1, 32) and ptrs.divisibility[1] == 16
    assert contiguity_order(by_name_value(info, "ptrs"), info) == [1, 0]
    assert vector_width(by_name_value(info, "ptrs"), None, info) == 8   # 8 x f16 = 16 B


def by_name_value(info, name):
    return next(v for v in info if v.name == name)


def test_multiple_of_and_max_contiguous_hints_override():
    _, _, at = analyse("""
        kernel @k(%p: ptr<f32> {divisibility = 16}, %m: i32) {
          %pid = program_id {axis = 0} : i32
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %b = constant {value = 64} : i32
          %s = mul %pid, %b : i32
          %ss = splat %s : tile<64xi32>
          %o = add %ss, %r : tile<64xi32>
          %ms = splat %m : tile<64xi32>
          %wrapped = rem %o, %ms : tile<64xi32>
          %h1 = hint %wrapped {kind = 'multiple_of', values = (64,)} : tile<64xi32>
          %h2 = hint %h1 {kind = 'max_contiguous', values = (64,)} : tile<64xi32>
          %ps = splat %p : tile<64xptr<f32>>
          %q = addptr %ps, %h2 : tile<64xptr<f32>>
          %v = load %q {} : tile<64xf32>
          return
        }""")
    assert at("wrapped").contiguity == (1,)    # m's divisibility is unknown
    assert at("h1").divisibility == (64,)
    assert at("h2").contiguity == (64,) and at("h2").divisibility == (64,)
    assert at("q").contiguity == (64,) and at("q").divisibility == (16,)


def test_rem_and_div_by_aligned_bound_keep_runs():
    _, _, at = analyse("""
        kernel @k(%m: i32 {divisibility = 16}) {
          %pid = program_id {axis = 0} : i32
          %b = constant {value = 64} : i32
          %s = mul %pid, %b : i32
          %ss = splat %s : tile<64xi32>
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %o = add %ss, %r : tile<64xi32>
          %ms = splat %m : tile<64xi32>
          %wrapped = rem %o, %ms : tile<64xi32>
          %row = idiv %o, %ms : tile<64xi32>
          %c4 = constant {value = 4} : tile<64xi32>
          %quarter = shr %r, %c4 : tile<64xi32>
          %c8 = constant {value = 8} : tile<64xi32>
          %eighth = idiv %r, %c8 : tile<64xi32>
          %scaled = mul %r, %c8 : tile<64xi32>
          return
        }""")
    assert at("wrapped").contiguity == (16,) and at("wrapped").divisibility == (16,)
    assert at("row").constancy == (16,)
    assert at("quarter").constancy == (16,)
    assert at("eighth").constancy == (8,)
    assert at("scaled").divisibility == (8,) and at("scaled").contiguity == (1,)


LOOP = """
    kernel @k(%p: ptr<f32> {{divisibility = 16}}, %n: i32) {{
      %r = arange {{start = 0, end = 64}} : tile<64xi32>
      %ps = splat %p : tile<64xptr<f32>>
      %ptrs = addptr %ps, %r : tile<64xptr<f32>>
      %lb = constant {{value = 0}} : i32
      %st = constant {{value = 64}} : i32
      %inc = constant {{value = {inc}}} : tile<64xi32>
      %out = for %lb, %n, %st, %ptrs : i32, i32, i32, tile<64xptr<f32>> -> tile<64xptr<f32>> {{
      ^(%i: i32, %cur: tile<64xptr<f32>>):
        %next = addptr %cur, %inc : tile<64xptr<f32>>
        yield %next
      }}
      return
    }}"""


@pytest.mark.parametrize("inc,div", [(64, 16), (2, 8), (1, 4), (0, 16)])
def test_loop_carried_pointer_increment_reaches_fixed_point(inc, div):
    _, _, at = analyse(LOOP.format(inc=inc))
    assert at("i").divisibility == (64,) and at("i").nonnegative
    for name in ("cur", "next", "out"):
        assert at(name).contiguity == (64,) and at(name).divisibility == (div,), name


def test_assume_adds_divisibility_and_sign():
    _, _, at = analyse("""
        kernel @k(%s: i32) {
          %c16 = constant {value = 16} : i32
          %c0 = constant {value = 0} : i32
          %m = rem %s, %c16 : i32
          %z = eq %m, %c0 : i1
          assume %z
          %pos = ge %s, %c0 : i1
          assume %pos
          %t = add %s, %s : i32
          return
        }""")
    assert at("s").divisibility == (16,) and at("s").nonnegative
    assert at("t").divisibility == (16,)


def test_if_joins_and_select_with_constant_condition():
    _, _, at = analyse("""
        kernel @k(%c: i1) {
          %a = constant {value = 32} : i32
          %b = constant {value = 8} : i32
          %r = if %c : i1 -> i32 {
            yield %a
          } {
            yield %b
          }
          %t = constant {value = True} : i1
          %s = select %t, %a, %b : i32
          return
        }""")
    assert at("r").divisibility == (8,) and at("r").constant is None
    assert at("s").constant == 32


# ---------------------------------------------------------------- brute-force soundness

def _check_facts(values: np.ndarray, info: AxisInfo, unit: int = 1) -> None:
    """Assert that concrete `values` (shape = tile shape) satisfy `info`."""
    values = np.asarray(values, dtype=np.int64)
    for d in range(values.ndim):
        moved = np.moveaxis(values, d, -1)
        n = moved.shape[-1]
        k, c, div = info.contiguity[d], info.constancy[d], info.divisibility[d]
        for start in range(0, n, k):
            run = moved[..., start:start + k]
            assert (np.diff(run, axis=-1) == unit).all(), f"dim {d}: not contiguous over {k}"
            assert (run[..., 0] % div == 0).all(), f"dim {d}: start not divisible by {div}"
        for start in range(0, n, c):
            blk = moved[..., start:start + c]
            assert (blk == blk[..., :1]).all(), f"dim {d}: not constant over {c}"


OPS = ["lt", "ge", "le", "gt", "eq", "rem", "idiv", "shr", "shl", "add", "sub", "mul",
       "and", "or", "xor", "maximum", "minimum"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("bound_kind", ["arg", "const"])
@pytest.mark.parametrize("seed", range(6))
def test_rules_are_sound_on_concrete_values(op, bound_kind, seed):
    """offs = pid*B + arange against a splatted bound, both operand orders: evaluate
    with the op table's numpy functions and check every fact the analysis claims."""
    rng = np.random.default_rng(seed * 101 + OPS.index(op))
    block = int(rng.choice([1, 8, 16, 32, 48]))
    bound_div = int(rng.choice([1, 2, 4, 16]))
    bound = int(rng.integers(-40, 40)) * bound_div
    if op in ("shl", "shr"):
        bound_div = int(rng.choice([1, 2, 4]))
        bound = int(rng.integers(0, 3)) * bound_div
    pid = int(rng.integers(0, 50))
    cmp = op in ("lt", "ge", "le", "gt", "eq")
    rt = "i1" if cmp else "i32"
    attrs = " {propagate_nan = False}" if op in ("maximum", "minimum") else ""
    arg = f"%bound: i32 {{divisibility = {bound_div}}}" if bound_kind == "arg" else "%unused: i32"
    bound_def = "" if bound_kind == "arg" else f"%bound = constant {{value = {bound}}} : i32"
    k = parse(f"""
        kernel @k({arg}) {{
          {bound_def}
          %pid = program_id {{axis = 0}} : i32
          %b = constant {{value = {block}}} : i32
          %s = mul %pid, %b : i32
          %ss = splat %s : tile<32xi32>
          %r = arange {{start = 0, end = 32}} : tile<32xi32>
          %o = add %ss, %r : tile<32xi32>
          %bs = splat %bound : tile<32xi32>
          %res = {op} %o, %bs{attrs} : tile<32x{rt}>
          %res2 = {op} %bs, %o{attrs} : tile<32x{rt}>
          return
        }}""")
    info = axis_info(k)
    fn = OP_INFO[Op(op)].numpy
    o = (pid * block + np.arange(32)).astype(np.int32)
    bs = np.full(32, bound, dtype=np.int32)
    _check_facts(o, info[by_name(k, "o")])
    _check_facts(np.asarray(fn(o, bs)), info[by_name(k, "res")])
    _check_facts(np.asarray(fn(bs, o)), info[by_name(k, "res2")])


@pytest.mark.parametrize("seed", range(8))
def test_2d_offsets_are_sound_on_concrete_values(seed):
    rng = np.random.default_rng(seed)
    stride_div = int(rng.choice([1, 4, 16]))
    stride = int(rng.integers(1, 20)) * stride_div
    base = int(rng.integers(0, 8)) * 16
    k = parse(f"""
        kernel @k(%a: ptr<f32> {{divisibility = 16}}, %stride: i32 {{divisibility = {stride_div}}}) {{
          %rm = arange {{start = 0, end = 16}} : tile<16xi32>
          %rn = arange {{start = 0, end = 8}} : tile<8xi32>
          %om = expand_dims %rm {{axis = 1}} : tile<16x1xi32>
          %ss = splat %stride : tile<16x1xi32>
          %rows = mul %om, %ss : tile<16x1xi32>
          %on = expand_dims %rn {{axis = 0}} : tile<1x8xi32>
          %rowsb = broadcast %rows {{shape = (16, 8)}} : tile<16x8xi32>
          %onb = broadcast %on {{shape = (16, 8)}} : tile<16x8xi32>
          %offs = add %rowsb, %onb : tile<16x8xi32>
          %t = permute %offs {{order = (1, 0)}} : tile<8x16xi32>
          %f = reshape %offs {{shape = (128,)}} : tile<128xi32>
          %as = splat %a : tile<16x8xptr<f32>>
          %ptrs = addptr %as, %offs : tile<16x8xptr<f32>>
          return
        }}""".replace(" {divisibility = 1}", ""))
    info = axis_info(k)
    offs = np.arange(16)[:, None] * stride + np.arange(8)[None, :]
    _check_facts(offs, info[by_name(k, "offs")])
    _check_facts(offs.T, info[by_name(k, "t")])
    _check_facts(offs.reshape(128), info[by_name(k, "f")])
    _check_facts(base + 4 * offs, info[by_name(k, "ptrs")], unit=4)
