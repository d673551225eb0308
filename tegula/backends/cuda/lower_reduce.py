"""Lowering of `reduce` (any axis, any number of operands, any combine region): first
within each thread over the registers that differ only along the axis (in increasing
axis order), then across the lanes that spread the axis with butterfly shuffles (every
lane ends with the warp's result), then across warps through shared memory (each warp
writes its partial, every thread folds the partials in warp order). The result is in
the slice layout, so the lanes/warps that spread the axis all hold the result.

Like Triton, the combine function is assumed associative and commutative (the butterfly
does not keep operand order); argmax/argmin break ties on the index to be so."""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import element_of
from ..llvm.types import I32, byte_size
from .convert import smem_load, smem_store
from .linear_layout import dim_fields, projection
from .nvvm import shuffle
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


def warp_index(lw: "KernelLowering", bits: list[int]) -> ir.Value:
    """The warp id's bits at positions `bits`, packed (i32, computed once in the entry)."""
    pb = lw.pb
    idx: ir.Value = ir.Constant(I32, 0)
    for j, bit in enumerate(bits):
        one = pb.and_(pb.lshr(lw.warp, ir.Constant(I32, bit)), ir.Constant(I32, 1))
        idx = pb.or_(idx, pb.shl(one, ir.Constant(I32, j)))
    return idx


def scratch_offsets(elems: list, count: int) -> tuple[list[int], int]:
    """Byte offsets of one scratch array of `count` elements per operand, 16-aligned."""
    offs, total = [], 0
    for e in elems:
        offs.append(total)
        total += (count * byte_size(e) + 15) // 16 * 16
    return offs, total


@handles(Op.REDUCE)
def lower_reduce(lw: "KernelLowering", ins: Instr) -> None:
    axis = ins.attrs.axis
    n = len(ins.operands)
    lay = lw.plan.required(ins, 0)
    inputs = [lw.operand(ins, k) for k in range(n)]
    elems = [element_of(o.type) for o in ins.operands]
    region = ins.regions[0]
    b = lw.b

    def combine(x: list[ir.Value], y: list[ir.Value]) -> list[ir.Value]:
        return lw.run_region(region, x + y)

    s, nbits = dim_fields(lay.shape)[axis]
    amask = ((1 << nbits) - 1) << s
    proj = projection(lay.shape, [d != axis for d in range(len(lay.shape))])

    # 1. within the thread
    groups: dict[int, list[tuple[int, int]]] = {}
    for r in range(lay.n_regs):
        e = lay.reg_element(r)
        groups.setdefault(proj(e), []).append((e & amask, r))
    acc: dict[int, list[ir.Value]] = {}
    for key, items in groups.items():
        items.sort()
        vals = [inputs[k][items[0][1]] for k in range(n)]
        for _c, r in items[1:]:
            vals = combine(vals, [inputs[k][r] for k in range(n)])
        acc[key] = vals

    # 2. across lanes: butterfly over each lane bit that moves along the axis
    for i, basis in enumerate(lay.lane):
        if basis & amask:
            for key, vals in acc.items():
                other = [shuffle(lw.dev, b, "bfly", v, ir.Constant(I32, 1 << i)) for v in vals]
                acc[key] = combine(vals, other)

    out = lw.plan.layouts.get(ins.results[0])
    reg_of = {out.reg_element(r): r for r in range(out.n_regs)} if out is not None else {0: 0}

    # 3. across warps, through shared memory
    warp_bits = [i for i, basis in enumerate(lay.warp) if basis & amask]
    if warp_bits:
        nw = 1 << len(warp_bits)
        widx = warp_index(lw, warp_bits)
        numel_out = lay.numel >> nbits
        offs, total = scratch_offsets(elems, numel_out * nw)
        lw.smem_begin(total)
        slots = {}
        for key in acc:
            flat = lw.element_flat(out, reg_of[key]) if out is not None else ir.Constant(I32, 0)
            slots[key] = b.mul(flat, ir.Constant(I32, nw))
            for k in range(n):
                idx = b.add(slots[key], widx)
                off = b.add(b.mul(idx, ir.Constant(I32, byte_size(elems[k]))), ir.Constant(I32, offs[k]))
                smem_store(lw, off, [acc[key][k]], elems[k])
        lw.smem_written()
        for key in acc:
            vals = None
            for w in range(nw):
                part = []
                for k in range(n):
                    idx = b.add(slots[key], ir.Constant(I32, w))
                    off = b.add(b.mul(idx, ir.Constant(I32, byte_size(elems[k]))), ir.Constant(I32, offs[k]))
                    part += smem_load(lw, off, 1, elems[k])
                vals = part if vals is None else combine(vals, part)
            acc[key] = vals

    for k, res in enumerate(ins.results):
        if out is None:
            lw.define(res, [acc[0][k]])
        else:
            lw.define(res, [acc[out.reg_element(r)][k] for r in range(out.n_regs)])
