"""Lowering of `scan` (inclusive, forward or reverse, any axis, any number of operands,
any associative combine region; operand order is kept, so it need not commute).

The plan gives the operand a scan-ready layout (`layouts.scan_ready`): going up the
axis, its bits are held by registers, then consecutive lane bits, then warp bits. Then:
1. each thread scans its own chunk sequentially;
2. the chunk totals are scanned across the lanes with `shfl.up` (Hillis–Steele over the
   axis lane bits) and each element is combined with the exclusive lane prefix;
3. the last lane of each warp writes the warp's total to shared memory, and each thread
   folds the totals of the warps before its own into its elements.
A reverse scan runs the same steps with the axis order flipped (`shfl.down`, the later
warps), i.e. element i combines the elements after it, accumulated from the end.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import element_of
from ..llvm.types import I32, byte_size
from .convert import smem_load, smem_store
from .linear_layout import dim_fields
from .lower_reduce import scratch_offsets, warp_index
from .nvvm import shuffle
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


def _select(b: ir.IRBuilder, cond: ir.Value, xs: list[ir.Value], ys: list[ir.Value]) -> list[ir.Value]:
    return [b.select(cond, x, y) for x, y in zip(xs, ys)]


@handles(Op.SCAN)
def lower_scan(lw: "KernelLowering", ins: Instr) -> None:
    axis, reverse = ins.attrs.axis, ins.attrs.reverse
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
    vals = [[inputs[k][r] for k in range(n)] for r in range(lay.n_regs)]

    # 1. within the thread, in axis order
    groups: dict[int, list[tuple[int, int]]] = {}
    for r in range(lay.n_regs):
        e = lay.reg_element(r)
        groups.setdefault(e & ~amask, []).append((e & amask, r))
    for items in groups.values():
        items.sort(reverse=reverse)
        for (_c, prev), (_d, r) in zip(items, items[1:]):
            vals[r] = combine(vals[prev], vals[r])
    totals = {key: vals[items[-1][1]] for key, items in groups.items()}

    # 2. across lanes
    lane_bits = sorted((i for i, x in enumerate(lay.lane) if x & amask), key=lambda i: lay.lane[i])
    last_lane = None
    if lane_bits:
        m, p0 = len(lane_bits), lane_bits[0]
        pb = lw.pb
        lidx = pb.and_(pb.lshr(lw.lane, ir.Constant(I32, p0)), ir.Constant(I32, (1 << m) - 1))
        if reverse:
            lidx = pb.sub(ir.Constant(I32, (1 << m) - 1), lidx)
        kind = "down" if reverse else "up"
        has_prev = b.icmp_unsigned(">", lidx, ir.Constant(I32, 0))
        for key, items in groups.items():
            t = totals[key]
            for j in range(m):
                o = [shuffle(lw.dev, b, kind, v, ir.Constant(I32, 1 << (p0 + j))) for v in t]
                take = b.icmp_unsigned(">=", lidx, ir.Constant(I32, 1 << j))
                t = _select(b, take, combine(o, t), t)
            excl = [shuffle(lw.dev, b, kind, v, ir.Constant(I32, 1 << p0)) for v in t]
            for _c, r in items:
                vals[r] = _select(b, has_prev, combine(excl, vals[r]), vals[r])
            totals[key] = t
        last_lane = b.icmp_unsigned("==", lidx, ir.Constant(I32, (1 << m) - 1))

    # 3. across warps
    warp_bits = sorted((i for i, x in enumerate(lay.warp) if x & amask), key=lambda i: lay.warp[i])
    if warp_bits:
        nw = 1 << len(warp_bits)
        widx = warp_index(lw, warp_bits)
        if reverse:
            widx = lw.pb.sub(ir.Constant(I32, nw - 1), widx)
        offs, total = scratch_offsets(elems, (lay.numel >> nbits) * nw)
        lw.scratch(total)
        slot = {}
        low = ir.Constant(I32, (1 << s) - 1)
        for key, items in groups.items():
            flat = lw.element_flat(lay, items[0][1])
            # the element's index with the axis bits squeezed out
            outer = b.shl(b.lshr(flat, ir.Constant(I32, s + nbits)), ir.Constant(I32, s))
            slot[key] = b.mul(b.or_(outer, b.and_(flat, low)), ir.Constant(I32, nw))

        def offset(k: int, idx: ir.Value) -> ir.Value:
            return b.add(b.mul(idx, ir.Constant(I32, byte_size(elems[k]))), ir.Constant(I32, offs[k]))

        def write() -> None:
            for key in groups:
                for k in range(n):
                    smem_store(lw, offset(k, b.add(slot[key], widx)), [totals[key][k]], elems[k])

        if last_lane is None:
            write()
        else:
            with b.if_then(last_lane):
                write()
        lw.smem_written()
        has_prev = b.icmp_unsigned(">", widx, ir.Constant(I32, 0))
        for key, items in groups.items():
            parts = []
            for w in range(nw - 1):
                idx = b.add(slot[key], ir.Constant(I32, w))
                parts.append([smem_load(lw, offset(k, idx), 1, elems[k])[0] for k in range(n)])
            prefix = parts[0]
            for w in range(1, nw - 1):
                before = b.icmp_unsigned("<", ir.Constant(I32, w), widx)
                prefix = _select(b, before, combine(prefix, parts[w]), prefix)
            for _c, r in items:
                vals[r] = _select(b, has_prev, combine(prefix, vals[r]), vals[r])

    for k, res in enumerate(ins.results):
        lw.define(res, [vals[r][k] for r in range(lay.n_regs)])
