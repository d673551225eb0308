"""The anchors of layout assignment (`assign_layouts`, step 1): the layouts that ops
with a fixed way of touching memory or tensor cores impose, from which hints then flow.

- a dot: the accumulator layout of the instruction that computes it (`choose_mma`:
  wgmma, mma.sync, else the FMA one), which its accumulator operand and result are
  hinted to;
- loads, stores and async copies: a coalesced blocked layout from the axis analysis
  (fastest dimension, vector width), one per shape and dimension order, as wide as the
  widest access of the group; except an async copy into a slot stored across the
  copy's direction (`transposing_copy`), a wgmma register-A operand loaded outside its
  dot's loop (`register_a_loads`), and small loads and stores, which take the layout
  their user or producer has (`loaded_where_used` — where that does not replicate the
  load into more registers outside a loop, `small_load_layout` — and
  `stored_where_computed`);
- a tile several mma.sync dots read from registers: one fragment layout they share
  (`shared_fragments`).

`AnchorRules` is a mixin of `assign_layouts._Assigner`: it reads the assigner's
`kernel`, `nw`, `capability`, `info`, `plan` and `remat_memo`, and writes `anchors`,
`acc_layouts`, `fragments` and, through `hint`, `hints` (a store's and a read-back
slot's soft).
"""
from __future__ import annotations

import math
from functools import cached_property
from typing import Optional

from ...config import knobs
from ...ir.core import Instr, Kernel, Value
from ...ir.ops import OP_INFO, Kind, Op
from ...ir.types import element_of, shape_of
from ...passes.ir_utils import users_of
from . import layouts as LY
from .convert import conversion_kind_of
from .dot_chains import chained_dots
from .layout_plan import is_rematerializable, is_tile
from .linear_layout import LinearLayout
from .lower_shared import slot_contiguous_dim
from .memory_accesses import ACCESS_OPS, access_operands, is_small_load, is_small_store, memory_access
from .mma import choose_mma
from .mma_layouts import mma_v2_accumulator, mma_v2_operand, mma_v3_accumulator, wgmma_register_a
from .slot_views import slot_read

# values a thread may load replicated outside loops rather than convert a small load
# once through shared memory (a 16-byte vector's worth of 32-bit values)
_FEW_REPLICATED_REGISTERS = 4
# a warp access at least this many contiguous bytes wide uses whole sectors
_SECTOR_BYTES = 32


def exclusive_branches(kernel: Kernel) -> dict[Instr, int]:
    """Which branch (0: then, 1: else) of the `if` that ends `kernel`'s body (just before
    its `return`) each instruction under it is in, when every memory access of the kernel
    is under it (an alignment-versioned kernel); else empty: accesses before the `if`
    share their layouts with those in either branch (a load, then `if EVEN: store`)."""
    body = kernel.body.instrs
    if len(body) < 2 or body[-1].op is not Op.RETURN or body[-2].op is not Op.IF:
        return {}
    if any(ins.op in ACCESS_OPS for top in body[:-2] for ins in top.walk()):
        return {}
    return {sub: i for i, region in enumerate(body[-2].regions) for sub in region.walk()}


class AnchorRules:
    """Step 1 of layout assignment: `seed` sets `anchors` (see the module docstring)."""

    def seed(self) -> None:
        instrs = list(self.kernel.walk())
        chained = chained_dots(self.kernel)
        for ins in instrs:
            if ins.op is Op.DOT and len(shape_of(ins.results[0].type)) == 2:
                m, n = shape_of(ins.results[0].type)
                # operands read in place from slots, directly or through a transposed view
                b_slot, a_slot = slot_read(ins.operands[1]), slot_read(ins.operands[0])
                in_shared, a_shared = b_slot is not None, a_slot is not None
                choice = choose_mma(ins, self.nw, self.capability, in_shared, a_shared, ins in chained)
                if choice is not None:
                    self.plan.mma[ins] = choice
                    if choice.version == 3:
                        c = mma_v3_accumulator((m, n), choice.warps_per_cta)
                    else:
                        c = mma_v2_accumulator((m, n), choice.warps_per_cta)
                else:
                    c = LY.fma_dot_layout(m, n, self.nw)
                self.anchors[ins] = c
                self.acc_layouts.add(c)
                self.hint(ins.operands[2], c)
                self.hint(ins.results[0], c)
            elif ins.op is Op.DOT_WAIT and ins.operands[0] in self.hints:
                # an accumulator waited for stays where its wgmma wrote it: in flight it
                # must not be moved at all (an epilogue `if` yields it on, see async_dots)
                self.hint(ins.results[0], self.hints[ins.operands[0]])
        # Memory ops of one shape and dimension order share one layout, as wide per
        # thread as the widest of them: each op then moves as many elements per access as
        # its own alignment allows, and values flow between them without conversions.
        # The two branches of an `if` that ends the kernel never exchange a value, so
        # their accesses are grouped apart: an alignment version's 16-byte rows
        # (`alignment_versions`) must not widen the layout of the other version's 2-byte
        # ones (8 separate loads a thread, where 1 was coalesced: a layer norm 1.6x slower).
        branch = exclusive_branches(self.kernel)
        groups: dict[tuple, list[tuple[Instr, int]]] = {}
        for ins in instrs:
            if ins.op in ACCESS_OPS and is_tile(access_operands(ins)[0]):
                order, vec = memory_access(ins, self.nw, self.info)
                self.plan.vec[ins], self.plan.vec_dim[ins] = vec, order[0]
                shape = shape_of(access_operands(ins)[0].type)
                transposing = self.transposing_copy(ins, order, vec, shape)
                if transposing is not None:
                    self.anchors[ins] = transposing
                    continue
                staged = self.staged_through_registers(ins, vec, shape)
                groups.setdefault((shape, tuple(order), branch.get(ins), staged is not None),
                                  []).append((ins, vec if staged is None else staged))
        for (shape, order, _branch, _staged), members in groups.items():
            lay = LY.default_blocked(shape, self.nw, max(v for _i, v in members), order)
            for ins, _vec in members:
                self.anchors[ins] = lay
        self.scan_accesses(instrs)
        self.register_a_loads(instrs)
        self.shared_fragments(instrs)
        self.slots_read_back(instrs)
        # a store's wish is soft: the store converts what a dot's accumulator computed
        # (one conversion of the narrowest value, at the store), rather than the
        # accumulator moving to the store's layout for the arithmetic in between
        for ins in instrs:
            if (ins in self.anchors and ins.op in ACCESS_OPS and not self.loaded_where_used(ins)
                    and not self.stored_where_computed(ins)):
                for v in ins.operands + ins.results:
                    self.hint(v, self.anchors[ins], soft=ins.op is Op.STORE)

    def staged_through_registers(self, ins: Instr, vec: int, shape: tuple) -> Optional[int]:
        """For an async_copy whose global runs are too narrow for cp.async (under 4 bytes:
        a row stride not known to be aligned), which the lowering copies through
        registers, element loads then slot stores (`lower_shared._copy_through_registers`):
        the elements a thread should hold along the fastest dimension, 16 bytes' worth
        (as every thread stays busy), so each thread's stores into the slot are 16-byte
        vectors where the narrow access width gave one 2-byte store per element; the
        loads are one element each either way, and a warp's next loads hit the lines its
        first ones brought into L1. Inductor's mm template with its sizes unknown (its
        unaligned alignment version) on an H200: 27 → 55 TFLOP/s at 128x128x64, 10 → 81
        at 64x128x128. None for every other access (a plain load's layout is its global
        access: wide runs of narrow loads would break its coalescing)."""
        if ins.op is not Op.ASYNC_COPY or ins.attrs.through_registers:
            return None
        elem_bytes = element_of(access_operands(ins)[0].type).pointee.bytes
        if vec * elem_bytes >= 4:
            return None
        return max(vec, min(16 // elem_bytes, math.prod(shape) // (32 * self.nw)))

    def slots_read_back(self, instrs: list[Instr]) -> None:
        """A ring slot read back into registers (a prefetched load no dot reads in place:
        fla's `v` scaled before its dot, attention's row statistics) is hinted to the
        layout its copies wrote it in: as wide reads as the copies, where the default
        layout of a 64x64 tile read 2 bytes a thread at a time."""
        written: dict[Value, LinearLayout] = {}
        for ins in instrs:
            if ins.op is Op.ASYNC_COPY and ins in self.anchors:
                written.setdefault(ins.operands[0], self.anchors[ins])
        for ins in instrs:
            if ins.op is Op.LOCAL_LOAD and ins.operands[0] in written and slot_read(ins.results[0]) is not None:
                users = [u for u in instrs if ins.results[0] in u.operands]
                if any(u.op is not Op.DOT for u in users):
                    # soft: a slot is read in any layout at one cost, so the layout of
                    # the accumulator it meets (fla's `v - dot(w, h)`) comes first
                    self.hint(ins.results[0], written[ins.operands[0]], soft=True)

    def shared_fragments(self, instrs: list[Instr]) -> None:
        """A tile that mma.sync dots read from registers is converted once to its fragment
        layout, the conversion shared by every dot that reads those registers, where each
        dot staged it through its own scratch (fla's kkt: each key block k_i is A of
        k_i·k_iᵀ and k_i·k_jᵀ and, transposed, B of k_j·k_iᵀ; 10 dots staged 4 blocks
        twice) — and once for a tile defined outside the loop (or branch) its dot is in
        (fla's wy backward reads its 64x64 `A` as a dot's A in three loops: staged in
        every iteration before; encode_layouts puts the conversion before the loop, as
        Triton's loop-invariant code motion does). An A fragment and the B fragment of
        the transposed tile hold the same elements in each thread (row/column by lane
        group, pairs along K by lane quad), so one layout serves both, the transpose then
        a local renaming. The reads whose wishes the most common such layout serves get
        it (`fragments`, by reader: the dot and operand, or the transposing permute);
        another read (the same tile as a B, not transposed) stages it as before."""
        if not knobs.mma_register_operands:
            return
        block_of = {ins: blk for blk in self.kernel.body.blocks() for ins in blk.instrs}
        # value -> its reads: (reader, operand index, fragment layout wanted, from a nested block?)
        reads: dict[Value, list[tuple[Instr, int, LinearLayout, bool]]] = {}
        for ins in instrs:
            choice = self.plan.mma.get(ins)
            if choice is None or choice.version != 2:
                continue
            for k in (0, 1):
                v = ins.operands[k]
                if slot_read(v) is not None:
                    continue
                lay = mma_v2_operand(k, shape_of(v.type), choice.warps_per_cta, choice.k_width)
                reader, at = ins, k
                if isinstance(v.owner, Instr) and v.owner.op is Op.PERMUTE:
                    reader, at = v.owner, 0
                    v, lay = v.owner.operands[0], LY.permute_source(lay, v.owner.attrs.order)
                nested = isinstance(v.owner, Instr) and block_of.get(ins) is not block_of.get(v.owner)
                reads.setdefault(v, []).append((reader, at, lay, nested))
        for v, wanted in reads.items():
            if is_rematerializable(v, self.remat_memo):
                continue
            groups = [[r for r in wanted if conversion_kind_of(lay, r[2], v) == "local"] for _i, _k, lay, _n in wanted]
            group = max(groups, key=len)
            if len(group) > 1 or any(nested for *_r, nested in group):
                for reader, at, _lay, _n in group:
                    self.fragments[(reader, at)] = group[0][2]

    def transposing_copy(self, ins: Instr, order: list[int], vec: int, shape: tuple) -> Optional[LinearLayout]:
        """The layout of an async_copy into a slot that a tensor-core dot wants stored
        along another dimension than the copy's pointers run (an 8-bit operand kept
        K-major, copied from a row-major B, where the pipeliner does not stage it:
        `pipeline_candidates.transposed_on_chip`): `transposing_copy_layout`, so that
        the lowering writes four transposed elements a 32-bit store instead of one byte
        a store (16 lanes of a store hit one bank there). Four lanes along the copy's
        direction: on an H200 the fp8 8192³ 128x256x128 matmul with a row-major B copied
        this way ran at 493 / 582 / 617 / 520 TFLOP/s with 1 / 2 / 4 / 8 (global loads
        touching fewer lines against stores meeting in more banks). None for every other
        access."""
        if ins.op is not Op.ASYNC_COPY or len(shape) != 2:
            return None
        elem_bytes = element_of(access_operands(ins)[0].type).pointee.bytes
        if elem_bytes >= 4:
            return None
        slot_fast = slot_contiguous_dim(self, ins.operands[0], order[0] == 0)
        if slot_fast is None or slot_fast == order[0]:
            return None
        return LY.transposing_copy_layout(shape, self.nw, vec, order[0], slot_fast, 4 // elem_bytes, lanes_fast=4)

    def scan_accesses(self, instrs: list[Instr]) -> None:
        """The loads a scan reads (through elementwise ops: fla's `.to(tl.float32)`) and
        the stores of what it computed are done in the scan's own layout
        (`layouts.scan_layout`, each thread holding a run of the axis and the lanes along
        the other dimensions) where that keeps every warp's access whole sectors: the
        tile then goes through shared memory neither before nor after the scan. fla's
        chunk_local_cumsum_vector scans [64, 64] fp32 chunks down their columns: loaded
        16 bytes a thread four rows to a warp, the scan ran across lanes (384 shuffles)
        and warps; now each thread scans one column in registers, loaded and stored 4
        bytes a lane along rows (Triton's layout for it)."""
        users = users_of(self.kernel.body)

        def elementwise(ins: object) -> bool:
            return isinstance(ins, Instr) and OP_INFO[ins.op].kind is Kind.ELEMENTWISE and len(ins.results) == 1

        for scan in instrs:
            if scan.op is not Op.SCAN or len(shape_of(scan.operands[0].type)) < 2:
                continue
            shape, axis = shape_of(scan.operands[0].type), scan.attrs.axis
            accesses = []
            for v in scan.operands:  # back through elementwise producers to loads
                ins = v.owner
                while elementwise(ins) and sum(is_tile(o) for o in ins.operands) == 1:
                    ins = next(o for o in ins.operands if is_tile(o)).owner
                if isinstance(ins, Instr) and ins.op is Op.LOAD:
                    accesses.append(ins)
            todo = list(scan.results)  # on through elementwise users to stores
            while todo:
                for ins in users.get(todo.pop(), []):
                    if ins.op is Op.STORE:
                        accesses.append(ins)
                    elif elementwise(ins):
                        todo.extend(ins.results)
            for ins in accesses:
                fast = self.plan.vec_dim.get(ins)
                if ins not in self.anchors or fast is None or fast == axis:
                    continue
                lay = LY.scan_layout(shape, axis, self.nw, fast)
                value = ins.results[0] if ins.op is Op.LOAD else ins.operands[1]
                vec, run = LY.warp_run(lay, fast, self.plan.vec[ins])
                if run * element_of(value.type).bytes >= _SECTOR_BYTES:
                    self.anchors[ins] = lay
                    self.plan.vec[ins] = vec

    def loaded_where_used(self, ins: Instr) -> bool:
        """A small load (`is_small_load`) is done in the layout its user wants when it
        has a hint: its threads then load replicated elements, which the L1 serves,
        instead of converting the tile through shared memory — two barriers in every
        iteration of tutorial 06's dK/dV loop (Triton's rule: such a load is cheap to
        rematerialize)."""
        return ins.op is Op.LOAD and is_small_load(ins, self.nw)

    def small_load_layout(self, ins: Instr, anchor: LinearLayout) -> LinearLayout:
        """The layout a small load (`loaded_where_used`) is done in: its user's wish
        where that holds few registers a thread (no more than the coalesced anchor, or
        `_FEW_REPLICATED_REGISTERS`: fla's recompute_w_u loads `beta` 4 a thread in
        the rows' slice, where converting it took two barriers), or where
        the load sits in a loop and the wish would otherwise be met through shared
        memory in every iteration (tutorial 06's row statistics). Elsewhere the anchor:
        a load before or after the loops converts once, while a replicated one holds its
        values and 64-bit addresses for the rest of the kernel — fla's
        chunk_fwd_kernel_o loaded its gate in the accumulator's column slice, 16
        registers a thread, and went from 122 to 144 registers (a CTA fewer per SM)."""
        want = self.hints.get(ins.results[0])
        if want is None or want.n_regs <= max(anchor.n_regs, _FEW_REPLICATED_REGISTERS):
            return want or anchor
        if ins in self.looped_instrs and conversion_kind_of(anchor, want, ins.results[0]) == "smem":
            return want
        return anchor

    @cached_property
    def looped_instrs(self) -> set[Instr]:
        """The ops in the body of some loop (run more than once per kernel)."""
        return {inner for ins in self.kernel.walk() if ins.op in (Op.FOR, Op.WHILE)
                for region in ins.regions for inner in region.walk()}

    def stored_where_computed(self, ins: Instr) -> bool:
        """A small store (`is_small_store`) wishes nothing of the value it stores: the
        value keeps the layout its producers give it (a reduction's slice: attention's
        logsumexp, from the dot's row maxima and sums), and the store is done in that
        layout, its pointers and mask built there (hinted by `refine`)."""
        return is_small_store(ins, self.nw)

    def register_a_loads(self, instrs: list[Instr]) -> None:
        """A load read only as wgmma's register A in a loop it sits outside (attention's
        Q, loaded once before its KV loop) is loaded straight into that layout:
        converting it at the dot would go through shared memory in every iteration. A
        load in the dot's own block (a lone dot) is usually staged in a slot by
        `stage_operands`; one that is not keeps its coalesced anchor — 16-byte loads
        (`ld.global.v4`, as Triton's test_dot checks) where the fragment layout reads 4
        bytes a lane, 8 rows a warp, half of each sector — and is converted at the dot,
        once."""
        users: dict[Value, list[Instr]] = {}
        for ins in instrs:
            for o in ins.operands:
                users.setdefault(o, []).append(ins)
        block_of = {ins: blk for blk in self.kernel.body.blocks() for ins in blk.instrs}
        for ins in instrs:
            choice = self.plan.mma.get(ins)
            if choice is None or choice.version != 3:
                continue
            src = ins.operands[0].owner
            if not isinstance(src, Instr) or src.op is not Op.LOAD:
                continue
            want = wgmma_register_a(shape_of(ins.operands[0].type), choice.warps_per_cta, choice.k_width)
            readers = users.get(src.results[0], [])
            if all(u.op is Op.DOT and u.operands[0] is src.results[0] and u.operands[1] is not src.results[0]
                   and self.plan.mma.get(u) == choice and block_of.get(u) is not block_of.get(src)
                   for u in readers):
                self.anchors[src] = want
