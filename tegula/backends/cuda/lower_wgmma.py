"""Lowering of `dot` with Hopper's `wgmma.mma_async` (sm_90a), for dots whose operands
are read in place from shared-memory slots (pipelined loads, see `pipeline_loops`).

Slots are stored in the NVMMA swizzled layout wgmma reads (`shared_layouts.
nvmma_offsets`): boxes `swizzle` bytes wide along the contiguous dimension (128, 64 or 32
bytes, the widest the tile allows), each 16-byte chunk of a row XOR-ed with the row's
index within its 8-row group. A is K-major (or M-major, `imm-trans-a = 1`); B is
N-major (`imm-trans-b = 1`) or K-major: a 16-bit slot the way its copies run, an 8-bit
one K-major always (`lower_shared._stored_along_rows`; wgmma has no 8-bit transpose).

Each warpgroup (4 warps) computes 64 rows per instruction; warpgroups tile M first,
then N (`mma.wgmma_warps`); the accumulator is `mma_layouts.mma_v3_accumulator`. A
shared-memory matrix descriptor (64 bits) gives the instruction the start address of
its sub-tile (bits 0-13, address >> 4), the leading byte offset (bits 16-29: from one
box to the next along the contiguous dimension), the stride byte offset (bits 32-45:
from one 8-row group to the next, 8 x swizzle bytes) and the swizzle mode (bits 62-63:
1 = 128 B, 2 = 64 B, 3 = 32 B). The start of a sub-tile at row r (r % 8 == 0) is the
same with or without the swizzle, so it is the slot layout's offset of that element.

One dot is `wgmma.fence`, one instruction per (M repetition, N repetition, K step) — the
first K step with a false scale-d predicate when the accumulator is zero, so that no
register is zeroed for it — a commit, and a wait for it (the accumulators pass through the wait, so nothing reads
them early) — unless the pipeliner left the dot in flight: then its only user is a
`dot_wait`, which waits until at most N groups are pending (1 after a dot carried into
the next iteration, so that one is issued while this one runs; 0 after the loop; for a
dot waited for at its first use, the dots issued since). An A operand in registers is
read by that wait too, so its registers are not reused while the wgmma may read them.

An f16 accumulator (`out_dtype=tl.float16`) is packed into `.f16x2` registers before
the first wgmma and unpacked after its wait (`packed_registers`), so the dot waits for
itself (`MmaChoice.waits_at_once`).

An fp8 dot whose `max_num_imprecise_acc` L is at most its K (`MmaChoice.promote`,
ceil(L / k) steps) accumulates each run of L products in a fresh partial accumulator, waits for it
and adds it to the f32 accumulator with ordinary `add.f32`, as Triton promotes them;
such a dot is never left in flight (`async_dots`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import element_of, shape_of
from ..llvm.types import F16, I32, I64
from .linear_layout import BitMap, dim_fields, dim_run
from .lower_mma import store_operand
from .mma import MmaChoice
from .packed_registers import is_f16, pack_registers, unpack_registers
from .pipeline_candidates import is_zero, zeroed_when
from .registry import handles
from .shared_buffers import SharedBuffer
from .shared_layouts import nvmma_offsets

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def swizzle_bytes(width_bytes: int) -> int:
    """The widest NVMMA swizzle a row of `width_bytes` allows (0: none fits)."""
    return next((s for s in (128, 64, 32) if width_bytes >= s), 0)


def wgmma_operand_offsets(k: int, shape: tuple[int, int], elem_bytes: int, along_rows: bool) -> Optional[BitMap]:
    """The slot layout of operand `k` (0: A [M, K]; 1: B [K, N]), contiguous along the
    first dimension when `along_rows` (an M-major A or a K-major B: the transposed
    NVMMA layout; 8-bit operands are always given K-major, `lower_shared`),
    else along the second; None when that extent is narrower than the smallest swizzle."""
    rows, cols = shape
    if not along_rows:
        sw = swizzle_bytes(cols * elem_bytes)
        return nvmma_offsets(shape, elem_bytes, sw) if sw else None
    sw = swizzle_bytes(rows * elem_bytes)
    return nvmma_offsets(shape, elem_bytes, sw, transposed=True) if sw else None


def _descriptor_bits(contig_elems: int, strided_elems: int, elem_bytes: int) -> int:
    """The constant fields of a descriptor: LBO (box to box), SBO (8 rows), mode."""
    sw = swizzle_bytes(contig_elems * elem_bytes)
    lbo = sw * strided_elems
    sbo = 8 * sw
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | SWIZZLE_MODE[sw] << 62


def _flat(shape: tuple[int, int], row: int, col: int) -> int:
    (rs, _), (cs, _) = dim_fields(shape)
    return row << rs | col << cs


def lower_dot_wgmma(lw: "KernelLowering", ins: Instr, choice: MmaChoice) -> None:
    b = lw.b
    (m, kk), n = shape_of(ins.operands[0].type), shape_of(ins.operands[1].type)[1]
    size = choice.elem_bytes
    wm, wn = choice.warps_per_cta
    gm = wm // 4
    n_cover = n // wn
    m_reps, n_reps, k_steps = m // (64 * gm), n_cover // choice.n_instr, kk // choice.k
    acc = list(lw.operand(ins, 2))
    # an accumulator restarted from zero on some iterations (`select(splat(c), 0, acc)`,
    # a flattened nest's first inner iteration): scale-d is !c on the first K step
    # instead of a select of every register (not with promotion, whose partial sums
    # add onto the accumulator's registers)
    restart = None
    reset = zeroed_when(ins.operands[2])
    if reset is not None and not choice.promote and lw.tile(reset[1]).layout == lw.tile(ins.operands[2]).layout \
            and lw.plan.required(ins, 2) in (None, lw.tile(ins.operands[2]).layout):
        acc, restart = list(lw.tile(reset[1]).regs), lw.scalar(reset[0])

    # an f16 accumulator lives in `.f16x2` registers from the first wgmma to the wait
    # (packed_registers): unpacked only once the wait has passed them through
    f16_acc = is_f16(acc[0])
    if f16_acc:
        acc = pack_registers(b, acc, 2)
        chunk_regs = choice.n_instr // 4
    else:
        chunk_regs = choice.n_instr // 2

    a_view = lw.shared_views.get(ins.operands[0])
    b_view = lw.shared_views.get(ins.operands[1])
    staged = b_view is None  # B computed in registers: stored into the dot's scratch
    if staged:
        b_view = _store_register_b(lw, ins, size)
    a_regs = None
    if a_view is None:  # A from registers, in the plan's wgmma_register_a layout
        a_regs = pack_registers(b, lw.operand(ins, 0), 4 // size)
        a_buf, a_base, a_map = None, None, None
    else:
        a_buf, a_base = a_view
        a_map = a_buf.offsets
    b_buf, b_base = b_view
    b_map = b_buf.offsets
    b_k_major = b_buf.along_rows
    a_m_major = a_buf is not None and a_buf.along_rows
    a_bits = _descriptor_bits(m, kk, size) if a_m_major else _descriptor_bits(kk, m, size)
    b_bits = _descriptor_bits(kk, n, size) if b_k_major else _descriptor_bits(n, kk, size)

    # this warpgroup's place: (warp / 4) % gm along M, (warp / 4) / gm along N
    group = b.lshr(lw.warp, ir.Constant(I32, 2))
    g_m = b.urem(group, ir.Constant(I32, gm)) if gm > 1 else ir.Constant(I32, 0)
    g_n = b.udiv(group, ir.Constant(I32, gm)) if wn > 1 else ir.Constant(I32, 0)

    def group_part(mp: BitMap, shape: tuple[int, int], index: ir.Value, count: int, row: bool, step: int) -> ir.Value:
        """XOR of the slot offsets of the group's start (linear over GF(2))."""
        out: ir.Value = ir.Constant(I32, 0)
        for j in range(count.bit_length() - 1):
            img = mp(_flat(shape, step << j, 0) if row else _flat(shape, 0, step << j))
            bit = b.and_(b.lshr(index, ir.Constant(I32, j)), ir.Constant(I32, 1))
            out = b.xor(out, b.mul(bit, ir.Constant(I32, img)))
        return out

    a_group = group_part(a_map, (m, kk), g_m, gm, True, 64) if a_map is not None else None
    b_group = group_part(b_map, (kk, n), g_n, wn, False, n_cover)

    def base_descriptor(buf, base: ir.Value, bits: int, one_slot: bool) -> tuple[ir.Value, int]:
        """A slot's start address >> 4 (i32) and its descriptor's constant fields,
        computed once per dot: a sub-tile's descriptor is then the start plus one
        constant (the fields and the sub-tile's offset >> 4, where the thread's
        warpgroup does not move it), not a recomputation of the shared address per
        sub-tile, which kept the issue slots of a one-warp-per-scheduler loop busy.
        Exact: slots are 1024-byte aligned (16 would do), every sub-tile starts on a
        16-byte boundary, and shared addresses stay below 2^18 bytes, so the 14-bit
        start field never carries into the next.

        A buffer of one slot (`one_slot`: an operand staged once, not a ring) has
        loop-invariant descriptors, computed before the loops. Knowing the start's low bits zero (the
        alignment), LLVM turns the adds into `or`s, and ptxas keeps the results in
        registers: cheapest, unless registers run short. With
        `lw.rematerialized_descriptors` the start passes through an opaque `mov`, the
        descriptors stay `add.s64 d, start, C` in the PTX (as Triton's do), and ptxas
        recomputes them in uniform registers where they are used: tutorial 06's D128
        backward, which spills, then reloads none of them in its loops (13 `LDL.64`
        per iteration of each main loop before; spills 2340 -> 2148 bytes, Triton
        1948), while the attention forward, which does not spill, would run 22-38 more
        uniform instructions per iteration. The compiler chooses by ptxas's spills."""
        addr = lw.dev.shared_address(b, base)
        start = b.and_(b.lshr(addr, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF))
        if one_slot:
            lw.staged_descriptors = True
            if lw.rematerialized_descriptors:
                start = lw.dev.opaque_i32(b, start)
        return start, bits

    def descriptor(base_desc: tuple[ir.Value, int], elem_off: ir.Value, by_group: bool) -> ir.Value:
        """The sub-tile's descriptor: start + offset >> 4 in the low bits, plus the
        constant fields. Where the offset depends on the thread's warpgroup
        (`by_group`), start and offset are summed in 32 bits, then widened, so that the
        high word stays a constant to ptxas: summed in 64 bits (`zext(start) +
        zext(offset) + fields`, which LLVM reassociates), ptxas 12.8 and 13.0 both
        dropped the high word's computation of the later K steps' B descriptors in
        fla's chunk_fwd_kernel_o (BK=BV=128, 8 warps, B split over two warpgroups):
        those wgmmas read an uninitialized uniform register as their stride and swizzle
        fields, and the H200 faulted (an out-of-range shared address) whenever an
        earlier kernel had left a bad value there (session 27). Where the offset is a
        constant, `zext(start) + constant` is one add that ptxas rematerializes from the
        start where registers run short (tutorial 06's D128 backward spills 2088 bytes
        so, 2416 with the 32-bit sum)."""
        start, bits = base_desc
        step = b.lshr(b.mul(elem_off, ir.Constant(I32, size)), ir.Constant(I32, 4))
        if by_group:
            return b.add(b.zext(b.add(start, step), I64), ir.Constant(I64, bits))
        return b.add(b.zext(start, I64), b.add(b.zext(step, I64), ir.Constant(I64, bits)))

    b_desc = base_descriptor(b_buf, b_base, b_bits, not staged and b_buf.one_slot)
    a_desc = base_descriptor(a_buf, a_base, a_bits, a_buf.one_slot) if a_base is not None else None

    chunk = chunk_regs
    # A zero accumulator (a fresh `tl.dot(a, b)`) is not materialized: the first K step
    # of each sub-tile runs with scale-d false (D = A·B) and later ones accumulate.
    zero_acc = is_zero(ins.operands[2])

    def issue(steps: range, regs_of: dict[tuple[int, int], list[ir.Value]], fresh: bool) -> None:
        """The wgmmas of K steps `steps` of every sub-tile, into `regs_of[(i, j)]`
        (scale-d false on the first step when `fresh`)."""
        for i in range(m_reps):
            for j in range(n_reps):
                regs = regs_of[(i, j)]
                for s in steps:
                    b_off = b.xor(b_group, ir.Constant(I32, b_map(_flat((kk, n), s * choice.k, j * choice.n_instr))))
                    desc_b = descriptor(b_desc, b_off, wn > 1)
                    scale_d = not (fresh and s == steps.start)
                    if restart is not None and s == steps.start and not fresh:
                        scale_d = b.not_(restart)
                    if a_regs is not None:
                        # the fragment registers first, then K steps, then M repetitions
                        frag = a_regs[(i * k_steps + s) * 4:(i * k_steps + s + 1) * 4]
                        regs = lw.dev.wgmma_rs(b, choice, frag, desc_b, regs, not b_k_major, scale_d)
                        continue
                    a_off = b.xor(a_group, ir.Constant(I32, a_map(_flat((m, kk), i * 64 * gm, s * choice.k))))
                    regs = lw.dev.wgmma(b, choice, descriptor(a_desc, a_off, gm > 1), desc_b, regs, not b_k_major,
                                        a_m_major, scale_d)
                regs_of[(i, j)] = regs

    def by_tile(regs: list[ir.Value]) -> dict[tuple[int, int], list[ir.Value]]:
        return {(i, j): regs[(i * n_reps + j) * chunk:(i * n_reps + j + 1) * chunk]
                for i in range(m_reps) for j in range(n_reps)}

    def flat(tiles: dict[tuple[int, int], list[ir.Value]]) -> list[ir.Value]:
        return [r for i in range(m_reps) for j in range(n_reps) for r in tiles[(i, j)]]

    tiles = by_tile(acc)
    lw.dev.wgmma_fence(b)
    if not choice.promote:
        issue(range(k_steps), tiles, zero_acc)
        acc = flat(tiles)
        lw.dev.wgmma_commit(b)
        if f16_acc:  # never left in flight (MmaChoice.waits_at_once)
            acc = unpack_registers(b, lw.dev.wgmma_wait(b, acc), F16, 2)
        elif staged or not _waited_later(lw, ins):  # (a staged B's scratch is reused next)
            acc = lw.dev.wgmma_wait(b, acc)
        elif a_regs is not None:
            lw.in_flight_inputs[ins.results[0]] = a_regs
        lw.define(ins.results[0], acc)
        return
    # max_num_imprecise_acc: each run of `promote` K steps accumulates in a fresh partial
    # accumulator, waited for and added to the f32 one (Triton's promotion of fp8 dots);
    # the adds contract under enable_fp_fusion as every float add does (PTX `add.f32`,
    # not `add.rn.f32`, which is what Triton's code and its tests show)
    contract = ("contract",) if lw.target.fp_contract else ()
    for start in range(0, k_steps, choice.promote):
        partial = dict(tiles)
        issue(range(start, min(start + choice.promote, k_steps)), partial, fresh=True)
        lw.dev.wgmma_commit(b)
        done = lw.dev.wgmma_wait(b, flat(partial))
        acc = done if zero_acc and start == 0 else [b.fadd(t, p, flags=contract) for t, p in zip(flat(tiles), done)]
        tiles = by_tile(acc)
        if start + choice.promote < k_steps:
            lw.dev.wgmma_fence(b)  # the next wgmmas read registers written since the last ones
    lw.define(ins.results[0], acc)


def _store_register_b(lw: "KernelLowering", ins: Instr, size: int) -> tuple[SharedBuffer, ir.Value]:
    """B of a wgmma dot computed in registers (`mma.staged_register_b`), stored into the
    dot's scratch in the NVMMA layout, as Triton's local_alloc of a dot operand: along
    N, or along K where the registers run along K (each thread's runs are then 16-byte
    stores either way). Each thread fences its stores for the async proxy that wgmma
    reads through, then the warps meet at a barrier. Returns the view the descriptors
    are built from (one slot at the scratch's start, 1024-aligned by the allocation)."""
    kk, n = shape_of(ins.operands[1].type)
    lay = lw.plan.required(ins, 1)
    along_rows = dim_run(lay, 0) > dim_run(lay, 1)
    offsets = wgmma_operand_offsets(1, (kk, n), size, along_rows)
    if offsets is None:
        raise CompilationError(f"wgmma's B [{kk}, {n}] is narrower than the smallest swizzle", lw.loc())
    nbytes = kk * n * size
    start = lw.scratch(nbytes)  # (stores take offsets within the scratch)
    store_operand(lw, lw.operand(ins, 1), lay, offsets, element_of(ins.operands[1].type), start, False)
    lw.dev.fence_proxy_async(lw.b)
    lw.smem_written()
    buf = SharedBuffer(lw.scratch_base, nbytes, lw.scratch_base + nbytes, offsets, element_of(ins.operands[1].type),
                       along_rows)
    return buf, ir.Constant(I32, lw.scratch_base)


def _waited_later(lw: "KernelLowering", ins: Instr) -> bool:
    """Whether every use of the dot's result is a `dot_wait` (the pipeliner leaves the
    dot in flight and waits for it there)."""
    res = ins.results[0]
    users = [u for u in lw.kernel.walk() if res in u.operands]
    return bool(users) and all(u.op is Op.DOT_WAIT for u in users)


@handles(Op.DOT_WAIT)
def lower_dot_wait(lw: "KernelLowering", ins: Instr) -> None:
    """wgmma.wait_group N with the accumulators passed through; mma.sync and FMA dots
    complete in order, so the value is its operand when no dot of the kernel is a wgmma."""
    regs = lw.operand(ins, 0)
    if lw.capability >= 90 and any(c.version == 3 for c in lw.plan.mma.values()):
        words = list(regs)
        if is_f16(words[0]):  # a dot whose lowering waited already: the wait needs i32s
            words = pack_registers(lw.b, words, 2)
        words = lw.dev.wgmma_wait(lw.b, words, ins.attrs.pending,
                                  lw.in_flight_inputs.get(ins.operands[0], ()))
        regs = unpack_registers(lw.b, words, F16, 2) if is_f16(regs[0]) else words
    lw.define(ins.results[0], regs)
