"""Lowering of `dot` on tensor cores with `mma.sync` (sm_80 and newer).

The layout pass gave the result the accumulator layout of `mma_layouts` and recorded
the instruction (`mma.MmaChoice`). The operands arrive in whatever layout their
producers have (usually a coalesced load's) and go through shared memory once, then
`ldmatrix` hands each thread its fragments:
- A is stored [M, K] (K-contiguous) and read with `ldmatrix.x4`: one instruction gives
  the four registers of a 16-row A fragment;
- B of a 16-bit type is stored [K, N] as it usually arrives (N-contiguous) and read
  with `ldmatrix.x4.trans`, which transposes 8x8 blocks of 16-bit elements: one
  instruction gives the two registers of two 8-column B fragments; B of a 32- or 8-bit
  type is stored [N, K] and read without `.trans` (the transpose works on 16-bit
  elements only);
- both with Triton's XOR swizzle on 16-byte chunks, so the eight 16-byte rows one
  `ldmatrix` matrix reads sit in distinct banks, and stores are 16-byte vectors wherever
  a thread holds a chunk's elements in consecutive registers.
An operand whose warps already hold its fragments' elements (an accumulator of an
earlier dot on the same warps: fla's in-register triangular solves chain 16x16 tf32
dots on one warp) becomes its fragments in registers instead (`register_fragments`:
renamed registers or in-warp shuffles, `convert`), with no shared memory and no
barrier, as Triton converts a `#mma` value to `#dot_op` without shared memory where it
can.
Then each thread issues one `mma.sync` per (16-row, 8-column) tile it owns per K step,
chaining the accumulators.

Every address is a linear map: composing a layout's bases with the swizzle map gives a
"layout" whose flat index is the shared-memory element offset (`offset_layout`), so a
thread's part of an address is computed once and each register or repetition adds a
constant. The `ldmatrix` row addresses are such a layout too (`_ldmatrix_rows`): lanes
pick the row and 16-byte chunk of their matrix, warps and repetitions come from the
operand layout. f32 operands under `input_precision="tf32"` are rounded to tf32
(`cvt.rna` semantics, as the interpreter's rule and the FMA path) when written.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...config import knobs
from ...ir.core import Instr, Value
from ...ir.types import ScalarType, element_of, shape_of
from ..llvm.types import F32 as LF32
from ..llvm.types import I32
from .convert import conversion_kind_of, smem_store
from .ldmatrix_reads import matrix_rows, write_stmatrix
from .linear_layout import BitMap, LinearLayout, compose, dim_fields, log2, permute_view
from .mma import MmaChoice
from .mma_layouts import mma_v2_operand
from .packed_registers import pack_registers
from .shared_layouts import swizzled_offsets

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

CHUNK_BYTES = 16  # one ldmatrix row, one swizzle unit, one vector store


def operand_swizzle(shape: tuple[int, int], elem_bytes: int) -> BitMap:
    """The swizzle of a tile [rows, C] contiguous along C: 16-byte chunks permuted by
    the row, 8 rows apart at most 128 bytes wide (Triton's mma v2 choice)."""
    row_bytes = shape[1] * elem_bytes
    vec = CHUNK_BYTES // elem_bytes
    per_phase = max(1, 128 // row_bytes)
    max_phase = max(1, min(8, row_bytes // CHUNK_BYTES, 8 // per_phase))
    return swizzled_offsets(shape, vec, per_phase, max_phase)


def offset_layout(lay: LinearLayout, offsets: BitMap) -> LinearLayout:
    """`lay` with each basis sent through `offsets`: its flat index is then the shared
    element offset of the element (every map here is linear over GF(2))."""
    return lay.map_bases(offsets, lay.shape)


def round_tf32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """cvt.rna.tf32.f32: 10 mantissa bits, nearest with ties away from zero; NaN kept."""
    bits = b.add(b.bitcast(v, I32), ir.Constant(I32, 0x1000))
    r = b.bitcast(b.and_(bits, ir.Constant(I32, -0x2000)), LF32)
    return b.select(b.fcmp_unordered("uno", v, v), v, r)


def vector_run(where: LinearLayout, max_count: int) -> int:
    """How many consecutive registers a thread can store as one vector: the first
    register bases step the offset by 1, 2, 4, ... and every other basis leaves those
    low bits alone (so each group starts aligned)."""
    k = 0
    while k < len(where.reg) and where.reg[k] == 1 << k and (2 << k) <= max_count:
        k += 1
    low = (1 << k) - 1
    if any(bb & low for bb in where.reg[k:] + where.lane + where.warp):
        return 1
    return 1 << k


def store_operand(lw: "KernelLowering", regs: list[ir.Value], lay: LinearLayout, offsets: BitMap,
                  elem: ScalarType, base: "int | ir.Value", tf32: bool) -> None:
    """Store an operand's registers (in layout `lay`) in the layout `offsets` (element
    offsets) at `base`: a byte offset into the op's scratch (an int), or a slot's from
    the start of shared memory (an ir value); as wide vectors as the two layouts allow —
    or, on sm_90, with `stmatrix` (`.trans` where pairs run across the rows stored)
    where `lay` holds 16-bit fragments (a dot result cast for the next dot: each thread
    has two elements of a 16-byte row, so vectors are 4 bytes, and one stmatrix.x4
    writes four such rows of 8 lanes; swizzling keeps 16-byte rows whole)."""
    b = lw.b
    where = offset_layout(lay, offsets)
    size = elem.bits // 8
    start = ir.Constant(I32, lw.scratch_base + base) if isinstance(base, int) else base
    fragments = matrix_rows(where) if size == 2 and not tf32 and lw.capability >= 90 else None
    if fragments is not None:
        rows, count, trans = fragments
        write_stmatrix(lw, rows, count, lambda g: lw.element_byte_offset(rows, g, size, start), regs, trans)
        return
    run = vector_run(where, CHUNK_BYTES // size)
    for r in lay.distinct_register_groups(run):
        vals = [round_tf32(b, v) if tf32 else v for v in regs[r:r + run]]
        off = lw.element_byte_offset(where, r, size, start)
        smem_store(lw, off, vals, elem, absolute=True)


def _ldmatrix_rows(shape: tuple[int, int], row_dim: int, chunk: int, second: int,
                   op: LinearLayout, reps: list[int]) -> LinearLayout:
    """The row addresses of an `ldmatrix.x4` as a layout over the operand tile: lane bits
    0-2 pick one of a matrix's 8 rows (along `row_dim`), lane bit 3 the second matrix
    (`chunk`: the next 8 rows, or the next 16-byte chunk), lane bit 4 the third
    (`second`); warps as the operand layout; register bits enumerate `reps`."""
    s, _n = dim_fields(shape)[row_dim]
    lane = (1 << s, 2 << s, 4 << s, chunk, second)
    return LinearLayout(shape, tuple(reps), lane, op.warp)


def _bit(shape: tuple[int, int], dim: int, step: int) -> int:
    s, n = dim_fields(shape)[dim]
    k = log2(step)
    return 1 << (s + k) if k < n else 0


def operand_offsets(k: int, shape: tuple[int, int], elem_bytes: int,
                    k_major: Optional[bool] = None) -> BitMap:
    """Where operand `k` (0: A [M, K], 1: B [K, N]) of an mma.sync dot lives in shared
    memory: the element offset of each flat index of the operand tile. A is stored
    K-contiguous. B is stored K-contiguous ([N, K], read by `ldmatrix` without `.trans`)
    when `k_major`, else N-contiguous (read with `ldmatrix.trans`, which exists for
    16-bit elements only); by default a 16-bit B is N-contiguous, as a row-major B
    arrives, and other B K-contiguous."""
    if k_major is None:
        k_major = elem_bytes != 2
    if k == 0 or not k_major:
        return operand_swizzle(shape, elem_bytes)
    kk, n = shape
    return compose(operand_swizzle((n, kk), elem_bytes), permute_view((n, kk), (1, 0)))


def mma_operand_bytes(m: int, kk: int, n: int, elem_bytes: int) -> list[int]:
    """The scratch bytes of A (128-byte aligned) and of B when an mma.sync dot stages
    them (an operand read in place from a pipelined slot needs none)."""
    return [(m * kk * elem_bytes + 127) // 128 * 128, n * kk * elem_bytes]


def b_operand_maps(kk: int, n: int, elem_bytes: int) -> list[tuple[BitMap, bool]]:
    """The shared layouts an mma.sync B may be read in from a slot, with whether it is
    then read transposed (`ldmatrix.trans`): [K, N], else [N, K]."""
    return [(operand_offsets(1, (kk, n), elem_bytes, k_major=major), not major)
            for major in ((False, True) if elem_bytes == 2 else (True,))]


def register_fragments(op_idx: int, shape: tuple[int, int], choice: MmaChoice, own: Optional[LinearLayout],
                       v: Value) -> Optional[LinearLayout]:
    """The fragment layout operand `op_idx` of an mma.sync dot is converted to without
    shared memory (its own layout `own` holds each warp's fragment elements in that
    warp: `convert.conversion_kind_of` says local, remat or shuffle), else None (the
    operand is staged through the dot's scratch). The lowering and the scratch size
    (`shared_memory.scratch_need`) ask the same question."""
    if own is None or not knobs.mma_register_operands:
        return None
    frag = mma_v2_operand(op_idx, shape, choice.warps_per_cta, choice.k_width)
    return None if conversion_kind_of(own, frag, v) == "smem" else frag


def staged_operands(ins: Instr, choice: MmaChoice, layouts: dict, in_place: list[bool]) -> list[int]:
    """The operands of an mma.sync dot written to its scratch: those read neither in
    place from a slot nor converted in registers (`register_fragments`)."""
    shapes = [shape_of(o.type) for o in ins.operands[:2]]
    return [k for k in (0, 1) if not in_place[k]
            and register_fragments(k, shapes[k], choice, layouts.get(ins.operands[k]), ins.operands[k]) is None]


def _fragment_words(lw: "KernelLowering", v: Value, frag: LinearLayout, choice: MmaChoice) -> list[ir.Value]:
    """Operand `v` converted to `frag` in registers, as the instruction's i32 words
    (`k_width` elements each, the lower k in the low bits; tf32 rounded)."""
    b = lw.b
    regs = lw.convert(v, frag)
    if choice.ab_type == "tf32":  # k_width 1: one element a word
        return [b.bitcast(round_tf32(b, r), I32) for r in regs]
    return pack_registers(b, regs, choice.k_width)


def a_operand_maps(m: int, kk: int, elem_bytes: int) -> list[tuple[BitMap, bool]]:
    """The shared layouts an mma.sync A staged from registers may be written in, with
    whether `ldmatrix` then reads it transposed: [M, K], else (16-bit) [K, M], whose
    8x8 blocks `ldmatrix.trans` hands out as the A fragment."""
    maps = [(operand_offsets(0, (m, kk), elem_bytes), False)]
    if elem_bytes == 2:
        maps.append((compose(operand_swizzle((kk, m), elem_bytes), permute_view((kk, m), (1, 0))), True))
    return maps


def _widest_map(lay: LinearLayout, maps: list[tuple[BitMap, bool]], elem_bytes: int) -> tuple[BitMap, bool]:
    """Of `maps`, the first one the registers of `lay` store the widest vectors into."""
    runs = [vector_run(offset_layout(lay, mp), CHUNK_BYTES // elem_bytes) for mp, _t in maps]
    return maps[runs.index(max(runs))]


def staged_a_map(lay: LinearLayout, m: int, kk: int, elem_bytes: int) -> tuple[BitMap, bool]:
    """The shared layout an A staged from registers (in layout `lay`) is written in, and
    whether `ldmatrix` reads it transposed: [K, M] for registers running along M (a
    K-major load as A: fla's gla state update `dot(k * exp(gk_last - gk), v)`, k loaded
    [K, T] contiguous along K, took one 16-bit store an element), else [M, K]."""
    return _widest_map(lay, a_operand_maps(m, kk, elem_bytes), elem_bytes)


def staged_b_map(lay: LinearLayout, kk: int, n: int, elem_bytes: int) -> tuple[BitMap, bool]:
    """The shared layout a B staged from registers (in layout `lay`) is written in, and
    whether `ldmatrix` then reads it transposed: of the layouts B may be read in
    (`b_operand_maps`), the one the registers store the widest vectors into. A
    transposed load (`tl.dot(q, tl.trans(k))`, k loaded K-contiguous) runs its registers
    along K: written [K, N] it took one 16-bit store an element (fla's kkt_solve: 320
    `st.shared.b16`), written [N, K] 16-byte vectors and `ldmatrix` without `.trans`."""
    return _widest_map(lay, b_operand_maps(kk, n, elem_bytes), elem_bytes)


def lower_dot_mma(lw: "KernelLowering", ins: Instr, choice: MmaChoice) -> None:
    la, lb = lw.plan.required(ins, 0), lw.plan.required(ins, 1)
    ea, eb = element_of(ins.operands[0].type), element_of(ins.operands[1].type)
    (m, kk), n = shape_of(ins.operands[0].type), shape_of(ins.operands[1].type)[1]
    wm, wn = choice.warps_per_cta
    kw, size = choice.k_width, choice.elem_bytes
    tf32 = choice.ab_type == "tf32"
    chunk_elems = CHUNK_BYTES // size
    b_trans = size == 2  # [K, N] + ldmatrix.trans; else [N, K] + ldmatrix
    a_map, a_trans = operand_offsets(0, (m, kk), size), False
    b_map = operand_offsets(1, (kk, n), size)
    acc = lw.operand(ins, 2)

    # each operand is read from a shared-memory slot it already sits in (a pipelined
    # load, see lower_shared; a B slot may be either way round), or its registers are
    # written to scratch first
    bases: list[Optional[ir.Value]] = [lw.shared_operand(ins.operands[0], a_map), None]
    for mp, trans in b_operand_maps(kk, n, size):
        bases[1] = lw.shared_operand(ins.operands[1], mp)
        if bases[1] is not None:
            b_map, b_trans = mp, trans
            break
    sizes = mma_operand_bytes(m, kk, n, size)
    # operands in no slot: converted in registers to their fragments (i32 words in the
    # operand layout's register order), else staged through the dot's scratch
    frags = {k: register_fragments(k, shape_of(v.type), choice, lw.plan.layouts.get(v), v)
             for k, v in enumerate(ins.operands[:2]) if bases[k] is None}
    words = {k: _fragment_words(lw, ins.operands[k], frag, choice) for k, frag in frags.items() if frag is not None}
    staged = [k for k, frag in frags.items() if frag is None]
    if staged:
        regs = {k: lw.operand(ins, k) for k in staged}
        offs, total = {}, 0
        for k in staged:
            offs[k] = total
            total += sizes[k]
        lw.scratch(total)
        if 0 in staged:
            a_map, a_trans = staged_a_map(la, m, kk, size)
        if 1 in staged:
            b_map, b_trans = staged_b_map(lb, kk, n, size)
        for k in staged:
            lay, mp, elem = (la, a_map, ea) if k == 0 else (lb, b_map, eb)
            store_operand(lw, regs[k], lay, mp, elem, offs[k], tf32)
            bases[k] = ir.Constant(I32, lw.scratch_base + offs[k])
        lw.smem_written()
    base_a, base_b = bases

    a_op = mma_v2_operand(0, (m, kk), choice.warps_per_cta, kw)
    b_op = mma_v2_operand(1, (kk, n), choice.warps_per_cta, kw)
    k_steps = kk // choice.k
    m_reps = max(1, m // (16 * wm))
    n_reps = max(1, n // (8 * wn))
    # register bases of the row-address layouts: K steps, then repetitions
    k_step_bases = [_bit((m, kk), 1, choice.k << i) for i in range(log2(k_steps))]
    m_rep_bases = [_bit((m, kk), 0, 16 * wm << i) for i in range(log2(m_reps))]
    if a_trans:  # matrices: rows are k; lane bit 3 → m + 8 (the next 16-byte chunk), lane bit 4 → k + 8
        a_rows = _ldmatrix_rows((m, kk), 1, _bit((m, kk), 0, 8), _bit((m, kk), 1, 8), a_op,
                                k_step_bases + m_rep_bases)
    else:  # rows are m; lane bit 3 → m + 8, lane bit 4 → the next 16-byte chunk of k
        a_rows = _ldmatrix_rows((m, kk), 0, _bit((m, kk), 0, 8), _bit((m, kk), 1, chunk_elems), a_op,
                                k_step_bases + m_rep_bases)
    pairs = n_reps // 2
    n_pair_bases = [_bit((kk, n), 1, 16 * wn << i) for i in range(log2(pairs))] if pairs else []
    bk_steps = [_bit((kk, n), 0, choice.k << i) for i in range(log2(k_steps))]
    second_n = _bit((kk, n), 1, 8 * wn) if n_reps > 1 else 0
    if b_trans:  # matrices: rows are k; lane bit 3 → k + 8, lane bit 4 → the next n tile
        b_rows = _ldmatrix_rows((kk, n), 0, _bit((kk, n), 0, 8), second_n, b_op, bk_steps + n_pair_bases)
    else:  # rows are n; lane bit 3 → the next 16-byte chunk of k, lane bit 4 → the next n tile
        s_n, _ = dim_fields((kk, n))[1]
        b_rows = LinearLayout((kk, n), tuple(bk_steps + n_pair_bases),
                              (1 << s_n, 2 << s_n, 4 << s_n, _bit((kk, n), 0, chunk_elems), second_n), b_op.warp)
    a_where, b_where = offset_layout(a_rows, a_map), offset_layout(b_rows, b_map)

    def ldmatrix(where: LinearLayout, reg: int, base: ir.Value, count: int, trans: bool) -> list[ir.Value]:
        off = lw.element_byte_offset(where, reg, size, base)
        return lw.dev.ldmatrix(lw.b, off, count, trans)

    ks_bits = log2(k_steps)
    nr_bits = log2(n_reps)
    acc = list(acc)
    for s in range(k_steps):
        if 0 in words:  # fragment f of (k step s, M repetition i): word f | s << 2 | i << (2 + ks_bits)
            a_frag = [[words[0][f | s << 2 | i << (2 + ks_bits)] for f in range(4)] for i in range(m_reps)]
        else:
            a_frag = [ldmatrix(a_where, s | i << ks_bits, base_a, 4, a_trans) for i in range(m_reps)]
        b_frag: list[list[ir.Value]] = []
        if 1 in words:  # fragment f of (k step s, N repetition j): word f | s << 1 | j << (1 + ks_bits)
            b_frag = [[words[1][f | s << 1 | j << (1 + ks_bits)] for f in range(2)] for j in range(n_reps)]
        else:
            for p in range(max(1, pairs)):
                regs = ldmatrix(b_where, s | p << ks_bits, base_b, 4 if n_reps > 1 else 2, b_trans)
                b_frag += [regs[0:2], regs[2:4]] if n_reps > 1 else [regs]
        for i in range(m_reps):
            for j in range(n_reps):
                idx = [f | j << 2 | i << (2 + nr_bits) for f in range(4)]
                out = lw.dev.mma(lw.b, choice, a_frag[i], b_frag[j], [acc[x] for x in idx])
                for x, v in zip(idx, out):
                    acc[x] = v
    lw.define(ins.results[0], acc)
