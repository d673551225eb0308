"""Lowering of `gather` (`tl.gather`) through shared memory, the general case.

Each thread writes the source elements its registers hold at their flat (row-major)
indices in the op's scratch (vectorised over registers holding consecutive elements,
as a conversion does), a barrier, then each thread reads each element of the result
— in the result's layout, which `assign_layouts` makes the index's — at the flat
index of its own position with the coordinate along the axis replaced by the index
value. Shapes are powers of two, so that is bit arithmetic on the flat index:
out = (o, k, j) -> src = (o, index, j), `o` above and `j` below the axis field.

An index outside [0, src.shape[axis]) reads position `index mod src.shape[axis]`
(inside the scratch) and the result is replaced by zero (false for bools), as the
interpreter defines it. Floats travel as the unsigned integers of their width, so
the elements are moved and selected as bits (bf16/fp8 NaN payloads intact; a host
build of the lowering, the emulator, may otherwise select narrow floats through f32,
quieting a signalling NaN). The work is one store per source element and one load per
result element, where the comparisons the language used to build cost
index size x source length (megabytes of PTX for Triton's [128, 64] test).

Triton reads from other lanes with warp shuffles when the axis lies within a warp in
both layouts; that is a later optimisation here (no scratch and no barrier).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import U8, U16, U32, U64, element_of, shape_of
from ..llvm.types import I32, byte_size, constant, llvm_type
from .convert import MAX_VECTOR_BYTES, flat_run, smem_load, smem_store
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


_BITS = {1: U8, 2: U16, 4: U32, 8: U64}


def gather_bytes(src_type: Any) -> int:
    """The scratch a gather of a source of type `src_type` needs: the whole source."""
    n = 1
    for d in shape_of(src_type):
        n *= d
    return n * byte_size(element_of(src_type))


def _as(b: ir.IRBuilder, v: ir.Value, ty: ir.Type) -> ir.Value:
    return v if v.type == ty else b.bitcast(v, ty)


def _log2(n: int) -> int:
    assert n > 0 and n & (n - 1) == 0, f"gather shapes are powers of two, got {n}"
    return n.bit_length() - 1


def _index_in_range(b: ir.IRBuilder, k: ir.Value, signed: bool, n: int) -> tuple[ir.Value, ir.Value]:
    """(k within [0, n) as an i1, k mod n as an i32) for an index register of any width."""
    width = k.type.width
    if width < 32:
        k = b.sext(k, I32) if signed else b.zext(k, I32)
    # unsigned comparison: a negative index is a huge unsigned one, out of range too
    inside = b.icmp_unsigned("<", k, ir.Constant(k.type, n))
    if width > 32:
        k = b.trunc(k, I32)
    return inside, b.and_(k, ir.Constant(I32, n - 1))


@handles(Op.GATHER)
def lower_gather(lw: "KernelLowering", ins: Instr) -> None:
    b = lw.b
    src_v, idx_v = ins.operands
    res = ins.results[0]
    axis = ins.attrs.axis
    elem = element_of(src_v.type)
    esize = byte_size(elem)
    src_shape, idx_shape = shape_of(src_v.type), shape_of(idx_v.type)
    inner = 1
    for d in src_shape[axis + 1:]:
        inner *= d
    n_src, n_idx = src_shape[axis], idx_shape[axis]
    low, src_high, idx_high = _log2(inner), _log2(n_src * inner), _log2(n_idx * inner)
    signed = element_of(idx_v.type).is_signed
    bits = _BITS.get(esize) if elem.is_float else None  # floats move as their bits
    value_type = bits or elem
    zero = constant(value_type, 0)

    src_l = lw.tile(src_v).layout
    out_l = lw.plan.layouts[res]
    src_regs = lw.operand(ins, 0)
    if bits is not None:
        src_regs = [_as(b, x, llvm_type(bits)) for x in src_regs]
    idx_regs = lw.operand(ins, 1)
    if len(idx_regs) == 1:  # a uniform index (a scalar's splat)
        idx_regs = idx_regs * out_l.n_regs

    lw.scratch(gather_bytes(src_v.type))
    w = flat_run(src_l, max(1, MAX_VECTOR_BYTES // esize))
    for g in range(0, src_l.n_regs, w):
        offset = b.mul(lw.element_flat(src_l, g), ir.Constant(I32, esize))
        smem_store(lw, offset, src_regs[g:g + w], value_type)
    lw.smem_written()

    out = []
    for r in range(out_l.n_regs):
        inside, k = _index_in_range(b, idx_regs[r], signed, n_src)
        flat = lw.element_flat(out_l, r)
        outer = b.shl(b.lshr(flat, ir.Constant(I32, idx_high)), ir.Constant(I32, src_high))
        at = b.or_(outer, b.shl(k, ir.Constant(I32, low)))
        if low:
            at = b.or_(at, b.and_(flat, ir.Constant(I32, inner - 1)))
        v = b.select(inside, smem_load(lw, b.mul(at, ir.Constant(I32, esize)), 1, value_type)[0], zero)
        out.append(_as(b, v, llvm_type(elem)))
    lw.define(res, out)
