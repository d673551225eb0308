"""`input_precision="tf32x3"` dots as three tf32 tensor-core dots (sm_80 and newer).

A float32 value `x` splits exactly into `big = tf32(x)` (nearest, ties away from zero:
`cvt.rna.tf32.f32`, written as integer ops on its bits so every backend and the host
emulator run it) and `small = x - big`. Then

    a @ b ~= a_small @ b_big + a_big @ b_small + a_big @ b_big

where every product runs on the tensor cores in tf32 (their lowering rounds `small` to
tf32 once more) and only `a_small @ b_small` (about 2**-22 of the result) is dropped:
float32 accuracy at tensor-core speed, as Triton 3.6 computes tf32x3 (its F32DotTC pass,
the same order of the three products, the small terms first). Before this pass tf32x3
dots ran exactly on FMAs, roughly 0.03x the speed of the tensor cores.

Only 2-D f32 x f32 dots that a tf32 `mma.sync` would compute are split
(`mma.tf32_on_tensor_cores`: sm_80+, M >= 16, N >= 8, K a multiple of 8, tensor cores
not turned off): any other stays an exact FMA dot, also cheaper than three. The pass
runs first in `cuda_tgir`, so the pipeliner and layout assignment see ordinary tf32
dots.
"""
from __future__ import annotations

from ...ir import attrs as A
from ...ir.builder import Builder
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import F32, I32, TileType, element_of, shape_of
from .mma import tf32_on_tensor_cores

# cvt.rna.tf32.f32 on the bits: add half of the dropped 13 bits' range, then drop them
_HALF_ULP, _KEEP = 0x1000, -0x2000  # 0xFFFFE000 as i32


def _is_tf32x3_candidate(ins: Instr, capability: int) -> bool:
    if ins.op is not Op.DOT or ins.attrs is None or ins.attrs.input_precision != "tf32x3":
        return False
    a, b = ins.operands[0].type, ins.operands[1].type
    if element_of(a) != F32 or element_of(b) != F32 or element_of(ins.results[0].type) != F32:
        return False
    return tf32_on_tensor_cores(ins, capability)


def _split(bb: Builder, x: Value) -> tuple[Value, Value]:
    """(big, small) of a float32 tile: big = tf32(x) rounded to nearest, small = x - big."""
    shape = shape_of(x.type)
    ints = TileType(shape, I32)

    def const(v: int) -> Value:
        return bb.splat(bb.constant(v, I32), shape)

    bits = bb.op1(Op.BITCAST, x, type=ints)
    rounded = bb.op1(Op.AND, bb.op1(Op.ADD, bits, const(_HALF_ULP)), const(_KEEP))
    big = bb.op1(Op.BITCAST, rounded, type=x.type)
    return big, bb.op1(Op.SUB, x, big)


def _rewrite(block: Block, index: int, dot: Instr) -> None:
    bb = Builder()
    bb.set_insertion_before(block, index)
    tf32 = A.DotAttrs(input_precision="tf32", max_num_imprecise_acc=dot.attrs.max_num_imprecise_acc)
    with bb.location(dot.loc):
        a, b, acc = dot.operands
        a_big, a_small = _split(bb, a)
        b_big, b_small = _split(bb, b)
        acc = bb.op1(Op.DOT, a_small, b_big, acc, attrs=tf32, type=dot.results[0].type)
        acc = bb.op1(Op.DOT, a_big, b_small, acc, attrs=tf32, type=dot.results[0].type)
    dot.operands[:] = [a_big, b_big, acc]
    dot.attrs = tf32


def split_tf32x3_dots(kernel: Kernel, capability: int) -> Kernel:
    """Every tf32x3 dot that fits a tf32 tensor-core instruction, as three tf32 dots."""
    for block in list(kernel.body.blocks()):
        i = 0
        while i < len(block.instrs):
            ins = block.instrs[i]
            if _is_tf32x3_candidate(ins, capability):
                before = len(block.instrs)
                _rewrite(block, i, ins)
                i += len(block.instrs) - before
            i += 1
    return kernel
