"""The layout-assignment pass of the CUDA backend: gives every tile value a distributed
layout (`LinearLayout`) and says in which layout each instruction consumes each operand.

Expects verified tile IR; guarantees a `LayoutPlan` in which every tile value has a
layout and every (instruction, tile operand) a required layout. Where the required
layout differs from the value's own, the lowering converts: for free when the thread
already holds the data (`local_register_map`), by recomputing cheap values
(rematerialisation of index arithmetic), else through shared memory.

How layouts are chosen:
1. *Anchors* (`layout_anchors.AnchorRules`): every load/store gets a coalesced blocked layout whose fastest dimension
   and vector width come from the axis analysis (16-byte accesses where the pointers
   are contiguous and aligned and the mask is constant over the vector); every dot
   gets the accumulator layout of the instruction that computes it (`mma.choose_mma`:
   an mma.sync accumulator where a tensor-core instruction fits, else the FMA one).
2. *Hints* flow backward from the anchors through elementwise ops, expand_dims,
   broadcast (to the slice of the wanted layout), reshape, permute and loop-carried
   values, so index computations are built directly in the layout their use wants.
   A store's wish is *soft* (as is a ring slot read back into registers): any firm
   wish replaces it.
3. A *forward* walk fixes each value's layout: sources and elementwise ops take their
   hint — but an elementwise op with only a soft wish (or none) that reads data in a
   dot's accumulator layout computes there, as Triton prefers the mma layout for all
   but memory ops, and the store converts the (narrower) result — else the layout of
   the operand costliest to move, else the default blocked layout), view ops take the
   induced layout, reductions produce slice layouts, scans keep or pick a
   scan-friendly layout, loops and ifs carry their operands' layouts.
4. One *refinement* round: a loop-carried value with a constant init takes the layout
   of what updates it, each elementwise op's layout becomes the hint of its operands
   that had none, hints flow backward again and the forward walk is redone (so a
   broadcast row maximum lands directly in the layout of the tile it meets, and
   attention's row sums stay in the dot's row layout). A constant in a loop's carried
   group does not speak for the group: CSE may share it with unrelated code.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from ...ir.accessors import for_inits, for_yields
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import OP_INFO, Kind, Op
from ...ir.types import element_of, shape_of
from ...passes import axis_info
from ...passes.dataflow import fixed_point
from . import layouts as LY
from .encodings import layout_of
from .layout_anchors import AnchorRules
from .layout_plan import Layout, LayoutPlan, is_rematerializable, is_tile
from .linear_layout import LinearLayout, broadcast_view, local_register_map
from .memory_accesses import ACCESS_OPS
from .mma_layouts import wgmma_register_a
from .slot_views import slot_read

# sweeps of backward hint propagation (each sweep moves hints through a whole nest)
_HINT_ROUNDS = 8

# ops whose operand's layout is a view of their result's (hints pass through them)
_VIEW_OPS = frozenset({Op.BROADCAST, Op.EXPAND_DIMS, Op.RESHAPE, Op.PERMUTE})


def view_source(ins: Instr, lay: Layout) -> Layout:
    """The layout of a view's operand (`_VIEW_OPS`) that gives its result `lay`."""
    shape = shape_of(ins.operands[0].type)
    if ins.op is Op.PERMUTE:
        return LY.permute_source(lay, ins.attrs.order)
    if ins.op is Op.BROADCAST:
        return LY.broadcast_source(lay, shape)
    return lay.with_shape(shape)  # expand_dims, reshape


# non-elementwise ops laid out like elementwise ones (result and operands share one
# layout, element by element): hints, and atomics (which need no coalescing anchor)
LANEWISE_OPS = frozenset({Op.HINT, Op.ATOMIC_RMW, Op.ATOMIC_CAS})


def _narrows(ins: Instr) -> bool:
    """Whether `ins` casts to a narrower type. Done in its operand's layout where that
    is a dot's accumulator layout (an epilogue's `acc.to(tl.float16)`, a carried
    state's `.to(bf16)`), whatever the cast's users wish, so that a conversion they need
    moves the narrow tile through shared memory (half the bytes and scratch of f32 to
    f16, as Triton does), not the f32 one."""
    return (ins.op is Op.CAST
            and element_of(ins.results[0].type).bits < element_of(ins.operands[0].type).bits)


class _Assigner(AnchorRules):
    def __init__(self, kernel: Kernel, num_warps: int, info: Mapping[Value, Any], capability: int):
        self.kernel = kernel
        self.nw = num_warps
        self.capability = capability
        self.info = info
        self.plan = LayoutPlan(num_warps)
        self.hints: dict[Value, LinearLayout] = {}
        self.anchors: dict[Instr, LinearLayout] = {}
        self.remat_memo: dict[Value, bool] = {}
        self.strengths: dict[Value, int] = {}
        # hints that only a store's coalescing (or a ring read back wide) speaks for:
        # any other hint replaces them, and a dot's accumulator layout beats them
        self.soft: set[Value] = set()
        self.acc_layouts: set[LinearLayout] = set()  # the dots' accumulator layouts
        self.acc_chosen: set[Value] = set()  # results laid out like their accumulator operand
        self.fragments: dict[tuple[Instr, int], LinearLayout] = {}  # by reader: see AnchorRules.shared_fragments

    # ---------------------------------------------------------------- hints
    def hint(self, v: Value, lay: Layout, soft: bool = False) -> bool:
        """Wish `lay` for `v`; the first wish stands, but a soft one (`soft`: from a
        store's anchor or a ring read back) gives way to the first firm one."""
        if lay is None or not is_tile(v) or tuple(lay.shape) != shape_of(v.type):
            return False
        if v in self.hints and (soft or v not in self.soft):
            return False
        self.record(v, lay, soft)
        return True

    def record(self, v: Value, lay: Layout, soft: bool) -> None:
        """Set `v`'s wish to `lay` over any it had (see `hint` for which may)."""
        self.hints[v] = lay
        if soft:
            self.soft.add(v)
        else:
            self.soft.discard(v)

    def propagate(self) -> None:
        instrs = list(self.kernel.walk())

        def sweep() -> bool:
            changed = False
            for ins in reversed(instrs):
                changed |= self.back(ins)
            return changed

        # hints are preferences: stopping early costs conversions, never correctness
        fixed_point(sweep, _HINT_ROUNDS)

    def back(self, ins: Instr) -> bool:
        op, h = ins.op, self.hints
        info = OP_INFO[op]
        changed = False
        res = ins.results[0] if len(ins.results) == 1 else None
        soft = res in self.soft
        if info.kind is Kind.ELEMENTWISE or op in LANEWISE_OPS:
            if res is not None and res in h:
                for o in ins.operands:
                    changed |= self.hint(o, h[res], soft)
        elif op in _VIEW_OPS and res in h and is_tile(ins.operands[0]):
            changed |= self.hint(ins.operands[0], view_source(ins, h[res]), soft)
        elif op is Op.GATHER and res in h:
            # the result is read in the index's layout (the source may be in any)
            changed |= self.hint(ins.operands[1], h[res], soft)
        elif op is Op.FOR:
            # a loop-carried value's layout is what its uses inside the loop want; the
            # wishes of code after the loop are not (a conversion there runs once)
            body = ins.regions[0]
            for k in range(len(ins.results)):
                group = [body.args[k + 1], for_yields(ins)[k], for_inits(ins)[k]]
                changed |= self.unify(group)
        elif op is Op.IF:
            for k, r in enumerate(ins.results):
                group = [r] + [reg.terminator.operands[k] for reg in ins.regions]
                changed |= self.unify(group)
        elif op is Op.WHILE:
            before, after = ins.regions
            for k, a in enumerate(before.args):
                changed |= self.unify([a, ins.operands[k], after.terminator.operands[k]])
            cond = before.terminator
            for k in range(len(ins.results)):
                changed |= self.unify([after.args[k], cond.operands[k + 1]])
        return changed

    def unify(self, group: list[Value]) -> bool:
        # A constant or index value in the group (a loop's `tl.zeros` init) can be built
        # in any layout for free, and one constant may serve unrelated uses (CSE merges
        # the row sums' zero init with the `l == 0.0` after the loop): its hint speaks
        # for those, not for the loop-carried value, whose group waits for a wish of its
        # own (what updates the value, given by the refinement round).
        wishes = [v for v in group if v in self.hints and not is_rematerializable(v, self.remat_memo)]
        firm = [v for v in wishes if v not in self.soft]
        if not wishes:
            return False
        known = (firm or wishes)[0]
        changed = False
        for v in group:
            changed |= self.hint(v, self.hints[known], known in self.soft)
        return changed

    # ---------------------------------------------------------------- forward walk
    def default(self, v: Value) -> LinearLayout:
        return LY.default_blocked(shape_of(v.type), self.nw)

    def own(self, v: Value) -> Layout:
        return self.plan.layouts.get(v) if is_tile(v) else None

    def set(self, v: Value, lay: Layout) -> None:
        if is_tile(v):
            assert lay is not None and tuple(lay.shape) == shape_of(v.type), (v, lay)
            self.plan.layouts[v] = lay

    def require(self, ins: Instr, lays: list[Layout]) -> None:
        self.plan.operand_layouts[ins] = [lay if is_tile(o) else None for o, lay in zip(ins.operands, lays)]

    def block(self, block: Block) -> None:
        for ins in block.instrs:
            self.forward(ins)

    def strength(self, v: Value) -> int:
        """How costly moving `v` to another layout is: 3 for data derived from loads,
        dots, reductions and scans (through shared memory, in every iteration of a
        loop); 1 for loop-carried values; 0 for index math (free to recompute). A
        branch-merged value is what its branches yield, and as costly to move: a
        masked score block from an `if` must keep the dot's layout rather than take a
        broadcast row maximum's (which moved it through shared memory every block)."""
        if v in self.strengths:
            return self.strengths[v]
        ins = v.owner
        if isinstance(ins, Instr) and ins.op is Op.IF:
            k = ins.results.index(v)
            self.strengths[v] = 1  # provisional, for cycles
            s = max([1] + [self.strength(r.terminator.operands[k]) for r in ins.regions
                           if is_tile(r.terminator.operands[k])])
        elif not isinstance(ins, Instr) or ins.op in (Op.FOR, Op.WHILE):
            s = 1
        elif ins.op in (Op.LOAD, Op.DOT, Op.REDUCE, Op.SCAN, Op.LOCAL_LOAD):
            s = 3
        elif ins.op is Op.BROADCAST:
            # moved by moving its source (`broadcast`), a row or column of the tile: a
            # reduction's result broadcast against a carried tile (fla's forward
            # substitution, `b_a[:, None] * b_Ai`) must not pull the tile into the
            # vector's transposed layout, converted through shared memory every step
            s = 0
        else:
            self.strengths[v] = 0  # provisional, for cycles
            s = max((self.strength(o) for o in ins.operands if is_tile(o)), default=0)
        self.strengths[v] = s
        return s

    def pick(self, ins: Instr) -> LinearLayout:
        """An elementwise result's layout without a hint: the layout of the operand
        that is costliest to move (see `strength`), the first one on ties."""
        tiles = [o for o in ins.operands if is_tile(o) and o in self.plan.layouts]
        if not tiles:
            return self.default(ins.results[0])
        best = max(tiles, key=self.strength)  # max keeps the first of equals
        return self.plan.layouts[best]

    def accumulator_operand(self, ins: Instr) -> Layout:
        """The layout of `ins`'s first operand that holds data in a dot's accumulator
        layout (a dot's result, or what was computed from one there), or None. An
        elementwise op with no firm wish computes there, as Triton's layout
        propagation prefers the mma layout for all but loads and stores: fla's
        `v - dot(w, h)`, its gating and `.to(bf16)` stay in the accumulator's layout and
        the store converts the narrow result, where the store's wish had converted the
        f32 accumulator through shared memory every iteration."""
        for o in ins.operands:
            lay = self.own(o)
            if lay is not None and lay in self.acc_layouts and not is_rematerializable(o, self.remat_memo):
                return lay
        return None

    def refine(self) -> bool:
        """After a first forward walk: what each elementwise op was given is wanted of
        its operands that had no wish of their own (a broadcast then lands in the
        layout of the data it meets; a loop-carried value adopts the layout of what
        updates it). Returns whether any new hint appeared."""
        changed = False
        # first what updates each loop-carried value: the forward walk gave a carried
        # value its init's layout, which for a constant init (`tl.zeros`) is only the
        # default one, and the ops reading the value would otherwise pass that on. So
        # it is for a value an inner loop carries on from an enclosing loop's such
        # value (attention's P through a block-sparse walk: spans in an outer loop,
        # the blocks of each in an inner one); loops inner first, so that an outer
        # loop whose yield is an inner loop's result takes what the inner one got.
        loops = [ins for ins in self.kernel.walk() if ins.op is Op.FOR]
        weak: set[Value] = set()  # carried values whose init speaks for nothing
        for ins in loops:  # outer first
            for k, init in enumerate(for_inits(ins)):
                if is_rematerializable(init, self.remat_memo) or init in weak:
                    weak.add(ins.regions[0].args[k + 1])
        given: dict[Value, Layout] = {}  # an inner loop's result -> what its carried value got
        for ins in reversed(loops):  # inner first
            body = ins.regions[0]
            for k, y in enumerate(for_yields(ins)):
                lay = given.get(y) or self.plan.layouts.get(y)
                if y not in given and y not in self.hints and self.strength(y) <= 1:
                    # an update computed from carried values and index math alone (a
                    # Welford weight, `w = where(m, w + 1, w)`) got the carried value's
                    # own first-walk layout, the default: it speaks for nothing either,
                    # and the value's readers decide below (`delta / w`, computed in the
                    # loads' layout). Inductor's looped layer norm moved its weight
                    # through shared memory twice an iteration (1.11-1.26x faster without)
                    continue
                if lay is not None and body.args[k + 1] in weak:
                    changed |= self.hint(body.args[k + 1], lay)
                    given[ins.results[k]] = self.hints.get(body.args[k + 1], lay)
        # the pointers and mask of a small store, built where its value is (first: the
        # ops computing them then pass that on rather than what the first walk gave them)
        for ins in self.kernel.walk():
            if ins.op is Op.STORE and ins in self.anchors and self.stored_where_computed(ins):
                lay = self.plan.layouts.get(ins.operands[1])
                if lay is not None:
                    for o in ins.operands:
                        changed |= self.hint(o, lay)
        # users before producers: a hint this round gives an op (the multiply that meets
        # a dot's accumulator) reaches its operands' producers in the same round, rather
        # than each producer taking the layout its user had in the first walk (fla's
        # gate `tl.where(mask, exp2(...), 0)` took its mask's layout, converted through
        # shared memory into the accumulator's)
        #
        # A value several users wish different layouts of gets its earliest user's wish
        # (the sweep meets that user last, and its wish replaces the ones this sweep
        # gave): the conversion then sits before a later use, where the work in between
        # hides it, not on the path into the first. fla's forward substitution
        # `b_a += tl.sum(b_a[:, None] * b_Ai, 0)` computes b_a where the broadcast
        # reads it; the add's wish had put a conversion before the product, on the
        # serial chain of every step (chunk_kda_fwd_kernel_inter_solve_fused, 10% slower).
        given: set[Value] = set()  # the values this sweep gave a wish

        def wish(v: Value, lay: Layout, soft: bool = False) -> bool:
            if v in given and is_tile(v) and tuple(lay.shape) == shape_of(v.type):
                if self.hints[v] == lay:
                    return False
                self.record(v, lay, soft)
                return True
            if self.hint(v, lay, soft):
                given.add(v)
                return True
            return False

        for ins in reversed(list(self.kernel.walk())):
            info = OP_INFO[ins.op]
            res = ins.results[0] if len(ins.results) == 1 else None
            if ins.op in _VIEW_OPS and res in self.hints and is_tile(ins.operands[0]):
                # a view passes its hint on in the same sweep: a gate broadcast into the
                # accumulator's layout (`b_v * where(m, exp2(g_last - g), 0)[:, None]`)
                # then reaches the elementwise ops computing it before they hand their
                # first-walk layout to their operands (fla's gated state loop converted
                # the gate's exp2 into the accumulator's row slice every iteration)
                changed |= wish(ins.operands[0], view_source(ins, self.hints[res]), res in self.soft)
            elif (info.kind is Kind.ELEMENTWISE or ins.op in LANEWISE_OPS) and res is not None:
                lay = self.hints.get(res) or self.plan.layouts.get(res)
                if res in self.acc_chosen:
                    # computed in an accumulator's layout over a store's soft wish: so
                    # are its operands (a ring slot is then read in that layout)
                    lay = self.plan.layouts[res]
                if lay is not None:
                    for o in ins.operands:
                        changed |= wish(o, lay)
        return changed

    def reset(self) -> None:
        self.plan.layouts.clear()
        self.plan.operand_layouts.clear()

    def forward(self, ins: Instr) -> None:
        op, ops = ins.op, ins.operands
        info = OP_INFO[op]
        res = ins.results[0] if len(ins.results) == 1 else None
        own = [self.own(o) for o in ops]
        if op in ACCESS_OPS and ins in self.anchors:
            a = self.anchors[ins]
            if self.loaded_where_used(ins):
                a = self.small_load_layout(ins, a)
            elif self.stored_where_computed(ins):
                a = own[1] or a
            self.require(ins, [a] * len(ops))
            for r in ins.results:
                self.set(r, a)
        elif op is Op.DOT:
            c = self.anchors.get(ins) or self.default(res)
            a_req = own[0]
            choice = self.plan.mma.get(ins)
            if choice is not None and choice.version == 3 and slot_read(ops[0]) is None:
                # wgmma with A from registers: the mma.sync A fragment per warp
                a_req = wgmma_register_a(shape_of(ops[0].type), choice.warps_per_cta, choice.k_width)
            b_req = own[1]
            if choice is not None and choice.version == 2:  # a tile read by several: converted once
                a_req, b_req = self.fragments.get((ins, 0), a_req), self.fragments.get((ins, 1), b_req)
            self.require(ins, [a_req, b_req, c])
            self.set(res, c)
        elif info.kind is Kind.SOURCE or op in (Op.SPLAT, Op.LOCAL_LOAD):
            if res is not None and is_tile(res):
                self.set(res, self.hints.get(res) or self.default(res))
            self.require(ins, own)
        elif (info.kind is Kind.ELEMENTWISE or op in LANEWISE_OPS) and res is not None:
            if is_tile(res):
                lay = self.hints.get(res)
                if lay is None or res in self.soft:
                    acc = self.accumulator_operand(ins)
                    if acc is not None:
                        lay = acc
                        self.acc_chosen.add(res)
                lay = lay or self.pick(ins)
                if _narrows(ins) and self.accumulator_operand(ins) is not None:
                    lay = own[0]  # cast where the dot left it; the narrower tile moves
                self.set(res, lay)
                self.require(ins, [lay] * len(ops))
            else:
                self.require(ins, own)
        elif op in (Op.EXPAND_DIMS, Op.RESHAPE):
            self.require(ins, own)
            if own[0] is None:  # scalar → tile of ones
                self.set(res, self.hints.get(res) or self.default(res))
            else:
                self.set(res, own[0].with_shape(shape_of(res.type)))
        elif op is Op.PERMUTE:
            src = self.fragments.get((ins, 0), own[0])  # a transposed dot operand: see shared_fragments
            self.require(ins, [src])
            self.set(res, LY.permute_layout(src, ins.attrs.order))
        elif op is Op.CONVERT_LAYOUT:
            # an explicit conversion (a hand-written or edited tgir): to the layout its
            # result type names, or none at all when the type names none
            self.require(ins, own)
            self.set(res, layout_of(res.type) or own[0])
        elif op is Op.DOT_WAIT:
            # the accumulator registers in flight stay where the dot put them
            self.require(ins, own)
            self.set(res, own[0])
        elif op is Op.BROADCAST:
            self.broadcast(ins, own[0])
        elif op is Op.GATHER:
            # the result in the index's layout (or the one its users want, the index
            # then converted); the source is written to shared memory from where it is
            lay = self.hints.get(res) or own[1]
            self.require(ins, [own[0], lay])
            self.set(res, lay)
        elif op is Op.JOIN:
            self.require(ins, [own[0], own[0]])
            self.set(res, LY.join_layout(own[0]))
        elif op is Op.SPLIT:
            ready = LY.split_ready(own[0])
            self.require(ins, [ready])
            half, _bit = LY.split_layout(ready)
            for r in ins.results:
                self.set(r, half)
        elif op is Op.REDUCE:
            base = own[0]
            self.require(ins, [base] * len(ops))
            for r in ins.results:
                self.set(r, LY.slice_layout(base, ins.attrs.axis))
            self.block(ins.regions[0])
        elif op is Op.SCAN:
            base = own[0]
            if not LY.scan_ready(base, ins.attrs.axis):
                base = LY.scan_layout(base.shape, ins.attrs.axis, self.nw)
            self.require(ins, [base] * len(ops))
            for r in ins.results:
                self.set(r, base)
            self.block(ins.regions[0])
        elif op is Op.FOR:
            self.for_loop(ins, own)
        elif op is Op.IF:
            self.if_op(ins, own)
        elif op is Op.WHILE:
            self.while_loop(ins, own)
        else:
            self.require(ins, own)
            for region in ins.regions:
                self.block(region)

    def broadcast(self, ins: Instr, src: Layout) -> None:
        res = ins.results[0]
        shape = shape_of(res.type)
        if src is None:  # a scalar broadcast is a splat
            self.set(res, self.hints.get(res) or self.default(res))
            self.require(ins, [None])
            return
        want = self.hints.get(res)
        if want is None:
            self.set(res, LY.broadcast_fill(src, shape))
            self.require(ins, [src])
            return
        view = broadcast_view(src.shape, shape)
        if local_register_map(src, want, view) is not None:
            self.require(ins, [src])
        else:
            self.require(ins, [LY.broadcast_source(want, src.shape)])
        self.set(res, want)

    def carried(self, values: list[Value], fallback: list[Layout]) -> list[Layout]:
        out = []
        for vs, fb in zip(values, fallback):
            lay = next((self.hints[v] for v in vs if v in self.hints), None)
            out.append(lay or fb)
        return out

    def for_loop(self, ins: Instr, own: list[Layout]) -> None:
        body = ins.regions[0]
        n = len(ins.results)
        lays = self.carried([[body.args[k + 1]] for k in range(n)], own[3:])
        self.require(ins, own[:3] + lays)
        for k in range(n):
            self.set(body.args[k + 1], lays[k])
            self.set(ins.results[k], lays[k])
        self.block(body)
        self.require(body.terminator, lays)

    def if_op(self, ins: Instr, own: list[Layout]) -> None:
        for region in ins.regions:
            self.block(region)
        n = len(ins.results)
        then_y = ins.regions[0].terminator
        fallback = [self.own(then_y.operands[k]) for k in range(n)]
        lays = self.carried([[ins.results[k]] for k in range(n)], fallback)
        for k in range(n):
            self.set(ins.results[k], lays[k])
        for region in ins.regions:
            self.require(region.terminator, lays)
        self.require(ins, own)

    def while_loop(self, ins: Instr, own: list[Layout]) -> None:
        before, after = ins.regions
        lays = self.carried([[a] for a in before.args], own)
        self.require(ins, lays)
        for a, lay in zip(before.args, lays):
            self.set(a, lay)
        self.block(before)
        cond = before.terminator
        fallback = [self.own(v) for v in cond.operands[1:]]
        out = self.carried([[after.args[k]] for k in range(len(ins.results))], fallback)
        self.require(cond, [None] + out)
        for k, lay in enumerate(out):
            self.set(after.args[k], lay)
            self.set(ins.results[k], lay)
        self.block(after)
        self.require(after.terminator, lays)


def assign_layouts(kernel: Kernel, num_warps: int, info: Optional[Mapping[Value, Any]] = None,
                   capability: int = 0) -> LayoutPlan:
    """Choose every tile value's layout for a CTA of `num_warps` warps on a GPU of
    compute `capability` (0: no tensor cores)."""
    a = _Assigner(kernel, num_warps, axis_info(kernel) if info is None else info, capability)
    a.plan.axis = a.info
    a.seed()
    a.propagate()
    a.block(kernel.body)
    if a.refine():
        a.propagate()
        a.reset()
        a.block(kernel.body)
    return a.plan
