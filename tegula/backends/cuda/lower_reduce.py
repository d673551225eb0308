"""Lowering of `reduce` (any axis, any number of operands, any combine region): first
within each thread over the registers that differ only along the axis, then across the
lanes that spread the axis with butterfly shuffles (every lane ends with the warp's
result), then across warps through shared memory: each warp writes its partial, one
barrier, and every thread folds the partials itself, so the result needs no second
shared-memory round trip and no second barrier (Triton's lowering reduces the partials
in one warp and broadcasts the result through shared memory again: two barriers per
reduction). Up to 4 warps, each thread reads all the partials (one vector load) and
folds them; from 8 warps on, the lanes that hold the same output element share the
partials out (one load each) and a butterfly over those lanes folds them
(`SHUFFLE_PARTIALS_FROM`: fewer instructions). The result is in the
slice layout, so the lanes/warps that spread the axis all hold the result.

The order of the combines is Triton's, so that a float sum gives Triton's bits (a
library's tests compare against references with tolerances its authors tuned on
Triton's results; a sum that cancels to near zero keeps only the rounding of its
order): a thread folds its own values in axis order, one after the other; the lanes
fold by a butterfly from the highest lane bit down (partner lane + 16, + 8, ..., + 1),
each lane combining its own value with its partner's; the warps' partials fold as the
same butterfly over warp order (with 4 warps: (p0 + p2) + (p1 + p3)), whether a thread
folds them itself or lanes fold them by shuffles. The scratch of a reduction
avoids the bytes of the scratch use just before it when it can (the allocation pass,
`shared_memory`), so consecutive reductions (softmax's max then sum, layer norm's
mean then variance) need no barrier between the previous readers and the new writers.

Like Triton, the combine function is assumed associative and commutative (the butterfly
and the trees do not keep operand order); argmax/argmin break ties on the index to be so."""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import ScalarType, element_of
from ..llvm.types import I32, byte_size
from .convert import smem_load, smem_store
from .linear_layout import LinearLayout, dim_fields, projection
from .nvvm import shuffle
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

# From this many warps on, the warps' partials are folded with lane shuffles (one
# scratch load per thread, log2(warps) shuffle+combine steps) instead of each thread
# loading and folding all of them (warps / 4 vector loads and warps - 1 combines): fewer
# instructions, which is what a CTA of many warps on a memory-bound kernel runs short of.
SHUFFLE_PARTIALS_FROM = 8


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


def cross_warp_bytes(lay: LinearLayout, axis: int, elems: list) -> int:
    """The scratch a reduction of a tile in `lay` along `axis` needs: one partial per
    warp that spreads the axis and output element (0 within one warp)."""
    s, nbits = dim_fields(lay.shape)[axis]
    amask = ((1 << nbits) - 1) << s
    warp_bits = [i for i, basis in enumerate(lay.warp) if basis & amask]
    if not warp_bits:
        return 0
    return scratch_offsets(elems, (lay.numel >> nbits) << len(warp_bits))[1]


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
        # in axis order, one after the other (as Triton): when the reduced values are
        # products, every step after the first is a fused multiply-add, where a tree
        # would leave half of the products as separate multiplies
        items.sort()
        vals = [inputs[k][items[0][1]] for k in range(n)]
        for _c, r in items[1:]:
            vals = combine(vals, [inputs[k][r] for k in range(n)])
        acc[key] = vals

    # 2. across lanes: butterfly over each lane bit that moves along the axis, the
    # highest first (Triton's order)
    for i in reversed(range(len(lay.lane))):
        if lay.lane[i] & amask:
            for key, vals in acc.items():
                other = [shuffle(lw.dev, b, "bfly", v, ir.Constant(I32, 1 << i)) for v in vals]
                acc[key] = combine(vals, other)

    out = lw.plan.layouts.get(ins.results[0])
    reg_of = {out.reg_element(r): r for r in range(out.n_regs)} if out is not None else {0: 0}

    # 3. across warps, through shared memory
    warp_bits = [i for i, basis in enumerate(lay.warp) if basis & amask]
    if warp_bits:
        nw = 1 << len(warp_bits)
        numel_out = lay.numel >> nbits
        offs, total = scratch_offsets(elems, numel_out * nw)
        base = lw.scratch(total)
        # every lane of a warp writes the same partial to the same word (one store);
        # the partials of one output element are adjacent, in warp order, so a thread
        # reads them back as vectors
        widx = warp_index(lw, warp_bits)
        slots = {}
        for key in acc:
            flat = lw.element_flat(out, reg_of[key]) if out is not None else ir.Constant(I32, 0)
            slots[key] = b.mul(flat, ir.Constant(I32, nw))
            for k in range(n):
                idx = b.add(slots[key], widx)
                off = b.add(b.mul(idx, ir.Constant(I32, byte_size(elems[k]))), ir.Constant(I32, base + offs[k]))
                smem_store(lw, off, [acc[key][k]], elems[k])
        lw.smem_written()
        # lanes that hold the same output elements (their bits are free in the result's
        # layout) can share out the partials and fold them by shuffles
        free = [i for i in range(len(lay.lane)) if out is None or out.lane[i] == 0]
        by_lanes = nw >= SHUFFLE_PARTIALS_FROM and (1 << len(free)) >= nw
        for key in acc:
            if by_lanes:
                acc[key] = fold_by_shuffles(lw, slots[key], nw, free, elems, [base + o for o in offs], combine)
                continue
            parts: list[list[ir.Value]] = [[] for _ in range(nw)]
            for k in range(n):
                esize = byte_size(elems[k])
                # up to 16 bytes per load (aligned: the partials start at a multiple of
                # nw elements); pointers one at a time
                per = max(1, min(nw, 16 // esize)) if isinstance(elems[k], ScalarType) else 1
                for w0 in range(0, nw, per):
                    idx = b.add(slots[key], ir.Constant(I32, w0))
                    off = b.add(b.mul(idx, ir.Constant(I32, esize)), ir.Constant(I32, base + offs[k]))
                    for j, v in enumerate(smem_load(lw, off, per, elems[k])):
                        parts[w0 + j].append(v)
            acc[key] = fold_halves(parts, combine)

    for k, res in enumerate(ins.results):
        if out is None:
            lw.define(res, [acc[0][k]])
        else:
            lw.define(res, [acc[out.reg_element(r)][k] for r in range(out.n_regs)])


def fold_by_shuffles(lw: "KernelLowering", slot: ir.Value, nw: int, free: list[int], elems: list,
                     offs: list[int], combine) -> list[ir.Value]:
    """The partials of one output element (`nw` of them from `slot` on, per operand at
    byte offset `offs[k]`) folded across lanes: with `free` the lane bits along which
    the output element does not change, the lane whose first log2(nw) free bits read j
    loads partial j, and a butterfly over those bits leaves the result in every lane.
    (Lanes differing in other bits hold other output elements and fold separately.)"""
    b = lw.b
    bits = free[:nw.bit_length() - 1]
    j: ir.Value = ir.Constant(I32, 0)
    for t, i in enumerate(bits):
        bit = lw.pb.and_(lw.pb.lshr(lw.lane, ir.Constant(I32, i)), ir.Constant(I32, 1))
        j = lw.pb.or_(j, lw.pb.shl(bit, ir.Constant(I32, t)))
    lane_slot = b.add(slot, j)
    vals = []
    for k, e in enumerate(elems):
        off = b.add(b.mul(lane_slot, ir.Constant(I32, byte_size(e))), ir.Constant(I32, offs[k]))
        vals += smem_load(lw, off, 1, e)
    for i in reversed(bits):  # the highest first, as `fold_halves`
        other = [shuffle(lw.dev, b, "bfly", v, ir.Constant(I32, 1 << i)) for v in vals]
        vals = combine(vals, other)
    return vals


def fold_halves(items: list[list[ir.Value]], combine) -> list[ir.Value]:
    """Combine `items` (each a list of operand values; a power of two of them) as a
    butterfly from the highest bit down leaves them in lane 0: item i with item i + n/2,
    then the first half's results the same way (a dependency chain of log2(n) combines)."""
    while len(items) > 1:
        half = len(items) // 2
        items = [combine(items[i], items[i + half]) for i in range(half)]
    return items[0]
