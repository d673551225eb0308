"""From a layout choice to `tgir` types, and back: the seam between choosing layouts
(`assign_layouts`, whose `LayoutPlan` lives only inside this stage) and lowering them.

`encode_layouts(kernel, plan)` writes the plan into the IR: every tile value's type
gets the encoding of its layout (`encodings.encoding_for`; a dot on tensor cores gets
the `#mma` of its instruction), and every operand the plan wants in another layout
than its own is fed by an explicit `convert_layout`, inserted before its first user
in a region and shared by later users the region dominates (the conversions the
lowering used to materialise on the fly, in the same places).

`plan_from_types(kernel, num_warps)` is what the lowering reads: the layouts of the
types, operands consumed as they are (conversions are ops now), each memory access's
vector width from the axis analysis of this very kernel, each tensor-core dot's
instruction from its `#mma`. It is all the lowering needs, so a `tgir` text read back
by the parser (an `asm["tgir"]` override) compiles like the kernel it was printed from.
"""
from __future__ import annotations

from ...errors import CompilationError
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import TileType, shape_of
from ...passes import axis_info
from . import layouts as LY
from .convert import conversion_kind_of
from .copy_caching import copies_through_l1
from .encodings import DotOperandEncoding, Encoding, MmaEncoding, SliceEncoding, encoding_for, layout_of
from .layout_plan import LayoutPlan, is_tile
from .linear_layout import LinearLayout
from .memory_accesses import ACCESS_OPS, access_operands, memory_access
from .mma import mma_instruction


class _Encoder:
    """One encoding per distinct layout (so that equal layouts get equal types): the
    dots' `#mma` first, then the slices the reductions make of their operands' (in
    program order), then `encoding_for`'s choice with those as candidates."""

    def __init__(self, plan: LayoutPlan):
        self.plan = plan
        self.candidates: list[Encoding] = []
        self.memo: dict[LinearLayout, Encoding] = {}
        for ins, choice in plan.mma.items():
            mma = MmaEncoding.of(choice)
            lay = plan.layouts[ins.results[0]]
            assert mma.to_linear(lay.shape) == lay, ins
            self.memo.setdefault(lay, mma)
            if mma not in self.candidates:
                self.candidates.append(mma)
            if choice.version == 3:
                self.candidates.append(DotOperandEncoding(0, mma, choice.k_width))

    def encoding(self, lay: LinearLayout) -> Encoding:
        if lay not in self.memo:
            self.memo[lay] = encoding_for(lay, self.candidates)
        return self.memo[lay]

    def slices(self, kernel: Kernel) -> None:
        for ins in kernel.walk():
            src = self.plan.layouts.get(ins.operands[0]) if ins.op is Op.REDUCE else None
            if src is None or len(src.shape) < 2:
                continue
            axis = ins.attrs.axis % len(src.shape)
            cand = SliceEncoding(axis, src.shape[axis], self.encoding(src))
            if cand not in self.candidates:
                self.candidates.append(cand)

    def retype(self, v: Value) -> None:
        lay = self.plan.layouts.get(v)
        if lay is not None and is_tile(v):
            v.type = TileType(v.type.shape, v.type.element, self.encoding(lay))

    def value_types(self, kernel: Kernel) -> None:
        self.slices(kernel)
        for block in kernel.body.blocks():
            for a in block.args:
                self.retype(a)
        for ins in kernel.walk():
            for r in ins.results:
                self.retype(r)

    def conversions(self, block: Block, frames: list["_Frame"], owner: Instr = None) -> None:
        frame = _Frame(owner, set(block.args))
        frames.append(frame)
        for ins in block.instrs:
            for k, o in enumerate(ins.operands):
                want, own = self.plan.required(ins, k), self.plan.layouts.get(o)
                if not is_tile(o) or want is None or own is None or want == own:
                    continue
                ins.operands[k] = self.converted(o, want, frames, ins.loc)
            frame.out.append(ins)
            frame.defs.update(ins.results)
            for region in ins.regions:
                self.conversions(region, frames, ins)
        block.instrs[:] = frame.out
        frames.pop()

    def converted(self, o: Value, want: LinearLayout, frames: list["_Frame"], loc) -> Value:
        """`o` in layout `want`: a conversion made once and shared by the users its
        block dominates. A value defined outside a loop is converted before the
        outermost such loop, not in every iteration (prepare_wy_repr_bwd's beta column,
        broadcast before its loops, met a tile in a dot's layout in each); a broadcast
        whose conversion would go through shared memory is redone from its converted
        source (a column moved, not the tile)."""
        key = (o, want)
        cv = next((f.scope[key] for f in reversed(frames) if key in f.scope), None)
        if cv is not None:
            return cv
        at = _hoisted_frame(o, frames)
        src = o.owner if isinstance(o.owner, Instr) else None
        cv = Value(o.type)  # typed with the other values, in value_types
        if (src is not None and src.op is Op.BROADCAST and is_tile(src.operands[0])
                and conversion_kind_of(self.plan.layouts[o], want, o) == "smem"):
            s = src.operands[0]
            while isinstance(s.owner, Instr) and s.owner.op is Op.CONVERT_LAYOUT:
                s = s.owner.operands[0]  # from the original: its conversion may exist already
            s_want = LY.broadcast_source(want, shape_of(s.type))
            s_cv = s if self.plan.layouts.get(s) == s_want else self.converted(s, s_want, frames, loc)
            made = Instr(Op.BROADCAST, [s_cv], [cv], src.attrs, loc=loc)
        else:
            made = Instr(Op.CONVERT_LAYOUT, [o], [cv], loc=loc)
        self.plan.layouts[cv] = want
        f = frames[at]
        if at == len(frames) - 1:
            f.out.append(made)
        else:  # before the loop of the next frame in, already placed in this one's block
            f.out.insert(f.out.index(frames[at + 1].owner), made)
        f.scope[key] = cv
        return cv


class _Frame:
    """A block being rewritten by `_Encoder.conversions`: the op whose region it is,
    the values defined in it so far, its conversions by (value, layout), its new ops."""

    def __init__(self, owner: Instr, defs: set) -> None:
        self.owner, self.defs = owner, defs
        self.scope: dict = {}
        self.out: list[Instr] = []


def _hoisted_frame(o: Value, frames: list[_Frame]) -> int:
    """The frame a conversion of `o` goes into: the current one, or, where loops lie
    between `o`'s definition and here, the block holding the outermost of them."""
    home = next((i for i in range(len(frames) - 1, -1, -1) if o in frames[i].defs), 0)
    for i in range(home + 1, len(frames)):
        if frames[i].owner is not None and frames[i].owner.op in (Op.FOR, Op.WHILE):
            return i - 1
    return len(frames) - 1


def encode_layouts(kernel: Kernel, plan: LayoutPlan) -> Kernel:
    """Write `plan` into `kernel` (in place): encodings in the tile types, explicit
    `convert_layout` ops. Returns the kernel."""
    enc = _Encoder(plan)
    enc.conversions(kernel.body, [])   # first: operands still have their plan layouts
    enc.value_types(kernel)
    return kernel


def plan_from_types(kernel: Kernel, num_warps: int) -> LayoutPlan:
    """The lowering's view of a `tgir` kernel (see the module docstring)."""
    plan = LayoutPlan(num_warps)
    plan.axis = axis_info(kernel)
    for block in kernel.body.blocks():
        for a in block.args:
            lay = layout_of(a.type)
            if lay is not None:
                plan.layouts[a] = lay
    for ins in kernel.walk():
        for r in ins.results:
            lay = layout_of(r.type)
            if lay is not None:
                plan.layouts[r] = lay
        enc = getattr(ins.results[0].type, "encoding", None) if ins.op is Op.DOT else None
        if isinstance(enc, MmaEncoding):
            choice = mma_instruction(ins, enc.version, enc.warps)
            if choice is None:
                raise CompilationError(f"no tensor-core instruction computes this dot for {enc}", ins.loc)
            plan.mma[ins] = choice
        if ins.op in ACCESS_OPS and is_tile(access_operands(ins)[0]):
            order, plan.vec[ins] = memory_access(ins, num_warps, plan.axis)
            plan.vec_dim[ins] = order[0]
    plan.l1_copies = copies_through_l1(kernel)
    return plan


def conversion_kind(ins: Instr) -> str:
    """How the lowering carries out a `convert_layout`: `local` (each thread already
    holds its elements: registers renamed), `remat` (index arithmetic recomputed in the
    new layout), `shuffle` (within each warp: `warp_exchange`) or `smem` (through
    shared-memory scratch, with barriers)."""
    return conversion_kind_of(layout_of(ins.operands[0].type), layout_of(ins.results[0].type), ins.operands[0])


def conversions(kernel: Kernel) -> list[tuple[Instr, str]]:
    """Every `convert_layout` of a `tgir` kernel with its `conversion_kind`, in order."""
    return [(ins, conversion_kind(ins)) for ins in kernel.walk() if ins.op is Op.CONVERT_LAYOUT]
