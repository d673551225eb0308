"""The software pipeliner's plan of one loop (`pipeline_loops`): which loads go
through rings, their address code (the loads' operands' backward slice in the body:
pure, but for the index loads of a gather, see `index_loads`), the loop-carried values
it advances S-1 iterations ahead (and those it keeps S-1 iterations behind as well, for
the body's math), the slice ops the rest of the body also needs, the
transposes, hints and mask bounds that travel with the copies, the wgmma dots left in
flight, and a flattened loop's coarse address code (`pipeline_memo`, pure ops only).
Loops that do not fit get no plan."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...config import knobs
from ...ir.accessors import memory_operands
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import OP_INFO, Op
from ...ir.types import TileType, element_of
from ...passes import axis_info
from ...passes.ir_utils import users_of
from .async_dots import LateWait, async_dots
from .copy_bounds import CopyBound, split_bound
from .index_loads import is_index_load
from .pipeline_candidates import is_candidate, prefetchable, transposed_by, writes_what_it_prefetches
from .pipeline_memo import CoarseMemo, find_memo
from .scalar_loads import tile_scalar_loads

# bytes of shared memory a CTA may use, by compute capability (cudaDevAttrMax-
# SharedMemoryPerBlockOptin): the rings of one loop must fit in it
SHARED_BYTES = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448}
DEFAULT_SHARED_BYTES = 49152


# the elements per thread a loop's lagged carried tiles may take, all their copies together
# (FlexAttention's backward lags its [64] query offsets, 2 x 64 over 256 threads)
LAGGED_ELEMENTS_PER_THREAD = 4


def shared_capacity(capability: int) -> int:
    return SHARED_BYTES.get(capability, 232448 if capability > 90 else DEFAULT_SHARED_BYTES)


@dataclass
class LoopPlan:
    loop: Instr
    stages: int
    loads: list[Instr]
    slice: list[Instr]                   # the address code, in body order
    ahead: set[int]                      # loop-carried values the address code advances
    keep: set[Instr] = field(default_factory=set)  # slice ops the rest of the body also uses
    # load -> the transpose its result goes through (the slot holds the transposed tile)
    transposes: dict[Instr, Instr] = field(default_factory=dict)
    # hints with unused results about the carried values or the address code's values:
    # issued with each iteration's copy of them, so the copies keep their alignment
    hints: list[Instr] = field(default_factory=list)
    # dots left in flight across iterations (wgmma), each the sole producer of the
    # loop-carried accumulator at that index of the yield
    async_dots: dict[int, Instr] = field(default_factory=dict)
    # the other wgmma dots of the body: where each is waited for (its first use)
    late_waits: dict[Instr, LateWait] = field(default_factory=dict)
    # load -> its mask split into uniform terms and a bound along the copies' run
    bounds: dict[Instr, CopyBound] = field(default_factory=dict)
    # warp-specialized (`warp_specialize`): the consumer warps there are, else 0
    consumer_warps: int = 0
    # a TMA-only ring released by arrivals (`tma_release_by_arrival`): every warp's, the
    # issuing thread alone waiting for them; else 0 (a CTA barrier, or consumer_warps)
    release_warps: int = 0
    # a flattened loop's address code that changes once per outer iteration (pipeline_memo)
    memo: Optional[CoarseMemo] = None
    # loads whose ring is a staging ring the way their copies run, transposed each
    # iteration into a K-major buffer for the wgmma that reads them (`transposed_on_chip`)
    staged_transposes: set[Instr] = field(default_factory=set)
    # loads in the address code (a gather's row indices, `index_loads`): issued with the
    # copies of their iteration, masked off where that iteration does not exist
    index_loads: set[Instr] = field(default_factory=set)
    # advanced carried values (scalars, small index vectors) whose current iteration's
    # value the body, or the code after the loop, also reads: the loop carries each S-1
    # iterations behind too
    # (a shift line of S-1 values: FlexAttention's block offset, a jump read from a
    # table each iteration, also positions the block's mask)
    lagged: list[int] = field(default_factory=list)

    @property
    def distance(self) -> int:
        """How many iterations ahead the copies run."""
        return self.stages - 1


def _free_values(ins: Instr) -> list[Value]:
    """The values `ins` reads, including those its regions read from outside."""
    inside = set()
    for sub in ins.walk():
        inside.update(sub.results)
        for region in sub.regions:
            inside.update(region.args)
    return [v for sub in ins.walk() for v in sub.operands if v not in inside]


def plan_loop(kernel: Kernel, loop: Instr, stages: int, num_warps: int, capability: int,
                       without_dot: bool = False) -> Optional[LoopPlan]:
    """A dot loop's plan with its 1-D loads prefetched too (`_with_vector_loads`), or
    without them where they keep the loop from being pipelined (a carried index they
    need that cannot be lagged, see `LoopPlan.lagged`)."""
    if without_dot:
        return _plan(kernel, loop, stages, num_warps, capability, without_dot=True)
    # its scalar loads as one-element tiles first (`scalar_loads`), prefetched with the
    # vectors; those the plan does not take go back to scalar loads and the loop is
    # planned again with the others (all of them, where it failed with them)
    body = loop.regions[0]
    tiles, undo = tile_scalar_loads(body)
    plan = _plan(kernel, loop, stages, num_warps, capability, vectors=True)
    taken = [scalar for tile, scalar in tiles.items() if plan is not None and tile in plan.loads]
    if len(taken) == len(tiles):
        return plan or _plan(kernel, loop, stages, num_warps, capability)
    undo()
    if taken:
        _tiles, undo = tile_scalar_loads(body, only=taken)
        plan = _plan(kernel, loop, stages, num_warps, capability, vectors=True)
        if plan is not None:
            return plan
        undo()
    return (_plan(kernel, loop, stages, num_warps, capability, vectors=True)
            or _plan(kernel, loop, stages, num_warps, capability))


def _plan(kernel: Kernel, loop: Instr, stages: int, num_warps: int, capability: int,
          without_dot: bool = False, vectors: bool = False) -> Optional[LoopPlan]:
    if stages < 2:
        return None
    body = loop.regions[0]
    uses = users_of(kernel.body)
    cache = {"kernel": kernel} if without_dot else None
    loads = [ins for ins in body.instrs if is_candidate(ins, body, uses, num_warps, capability, cache)]
    if vectors:
        # (also where no dot reads a load as it is: fla's recompute_w_u scales each
        # loaded block of v before it is B, a loop Triton pipelines all the same)
        loads = _with_vector_loads(kernel, body, loads)
    if not loads:
        return None
    if without_dot and writes_what_it_prefetches(kernel, body, loads):
        return None
    transposes = {} if without_dot else {
        ld: t for ld in loads if (t := transposed_by(ld.results[0], body, uses)) is not None}
    slot_bytes = sum(ld.results[0].type.numel * element_of(ld.results[0].type).bytes for ld in loads)
    stages = min(stages, shared_capacity(capability) // slot_bytes)
    if stages < 2:
        return None
    iv, iters, term = body.args[0], body.args[1:], body.terminator
    position = {ins: i for i, ins in enumerate(body.instrs)}
    members: set[Instr] = set()
    ahead: set[int] = set()
    work = [v for ld in loads for v in ld.operands]
    while work:
        v = work.pop()
        if v is iv:
            continue
        if v in iters:
            k = iters.index(v)
            if k not in ahead:
                ahead.add(k)
                work.append(term.operands[k])
            continue
        owner = v.owner
        if isinstance(owner, Instr) and owner in position and owner not in members:
            info = OP_INFO[owner.op]
            if owner in loads or owner.regions or not (info.pure or is_index_load(owner)):
                return None
            members.add(owner)
            work.extend(owner.operands)
    index_loads = {ins for ins in members if ins.op is Op.LOAD}
    if index_loads and writes_what_it_prefetches(kernel, body, sorted(index_loads, key=position.get)):
        return None  # an index read S-1 iterations early could miss the loop's own write
    load_set = set(loads)
    # values computed from the advanced carried values, which hold iteration k+S-1's,
    # with the carried values each depends on
    depends_ahead: dict[Value, frozenset[int]] = {iters[k]: frozenset((k,)) for k in ahead}
    for ins in body.instrs:
        if ins in members:
            deps = frozenset().union(*(depends_ahead.get(o, frozenset()) for o in ins.operands))
            if deps:
                depends_ahead.update((r, deps) for r in ins.results)
    # carried values whose current iteration's value the body also needs (`lagged`)
    lagged: set[int] = set()
    # A hint whose result is unused speaks of its operand in place (tl.multiple_of(a_ptrs,
    # 16) at the top of the body): it follows the address code to each iteration's copy.
    annotated = {iters[k] for k in ahead} | {r for ins in members for r in ins.results}
    hints = [ins for ins in body.instrs
             if ins.op is Op.HINT and not uses.get(ins.results[0]) and ins.operands[0] in annotated]
    keep: set[Instr] = set()
    for ins in body.instrs:
        if ins in members or ins in load_set or ins in transposes.values() or ins in hints:
            continue
        reads = _free_values(ins)
        if ins is term:
            reads = [v for k, v in enumerate(term.operands) if k not in ahead]
        for v in reads:
            # the current iteration's value, no longer carried: its carried values are
            # also kept S-1 iterations behind, and it is recomputed from them
            lagged.update(depends_ahead.get(v, ()))
            if isinstance(v.owner, Instr) and v.owner in members:
                keep.add(v.owner)
    # the cone of a kept op is kept too (it is recomputed for the current iteration)
    stack = list(keep)
    while stack:
        for o in stack.pop().operands:
            if isinstance(o.owner, Instr) and o.owner in members and o.owner not in keep:
                keep.add(o.owner)
                stack.append(o.owner)
    # code after the loop reads a value the pipelined loop runs ahead: its lagged copy
    lagged.update(k for k in ahead if uses.get(loop.results[k]))
    if lagged and not knobs.pipeline_lagged:
        return None
    if sum(iters[k].type.numel for k in lagged if isinstance(iters[k].type, TileType)) * (stages - 1) > \
            LAGGED_ELEMENTS_PER_THREAD * 32 * num_warps:
        return None  # (a tile kept S-1 times over costs its registers S-1 times: index vectors only)
    for k in ahead:
        if term.operands[k] in iters and iters.index(term.operands[k]) not in ahead:
            return None
    order = [ins for ins in body.instrs if ins in members]
    plan = LoopPlan(loop, stages, loads, order, ahead, keep, transposes=transposes, hints=hints,
                     bounds=_copy_bounds(kernel, loads), index_loads=index_loads, lagged=sorted(lagged))
    bound_values = [v for cb in plan.bounds.values() for v in (*cb.terms, cb.index, cb.bound)]
    plan.memo = find_memo(loop, order, loads + hints, bound_values)
    # a dot in flight across the back edge needs its copies S-2 iterations ahead (its
    # slot is not rewritten while it runs), so only from 3 stages on; dots waited for
    # within their iteration (late) at 2 stages too
    found = async_dots(kernel, loop, load_set, transposes, uses, num_warps, capability,
                       wait_at_use=knobs.wgmma_wait_at_use, carry=stages >= 3)
    plan.async_dots, plan.late_waits = found.carried, found.late
    return plan


def _with_vector_loads(kernel: Kernel, body: Block, loads: list[Instr]) -> list[Instr]:
    """`loads` (the dot operands a loop pipelines) and the loop's other 1-D and 2-D
    loads that a ring can prefetch too (`prefetchable`), read back into registers:
    attention backward's row maxima and deltas, read in every iteration of the dK/dV
    loop; fla's `v`, scaled before it is a dot's B. Loaded in place, their L2 latency
    was exposed every iteration — the deltas right before the product that needs them;
    prefetched with the tiles, they arrive S-1 iterations early, as in Triton's loop.
    None of them when the loop writes where they read."""
    cache: dict = {"kernel": kernel}
    uses = users_of(body)
    vectors = [ins for ins in body.instrs if ins.op is Op.LOAD and ins not in loads and not ins.attrs.volatile
               and isinstance(ins.results[0].type, TileType) and len(ins.results[0].type.shape) in (1, 2)
               and not _read_by_a_dot(ins.results[0], uses) and prefetchable(ins, body, cache)]
    if not vectors or writes_what_it_prefetches(kernel, body, vectors):
        return loads
    keep = set(loads) | set(vectors)
    return [ins for ins in body.instrs if ins in keep]


def _read_by_a_dot(v: Value, uses: dict[Value, list[Instr]]) -> bool:
    """Whether a dot reads `v` as it is or through a transpose: a slot read back into
    registers must not be a dot operand, which the layouts and the lowering take for one
    read in place (`slot_views.slot_read`)."""
    for u in uses.get(v, []):
        if u.op is Op.DOT or (u.op is Op.PERMUTE and any(w.op is Op.DOT for w in uses.get(u.results[0], []))):
            return True
    return False


def _copy_bounds(kernel: Kernel, loads: list[Instr]) -> dict[Instr, CopyBound]:
    """The masks of cp.async copies that narrow them only through a bound along their
    run (`copy_bounds.split_bound`); the axis analysis runs only when a load has a mask."""
    masked = [ld for ld in loads if ld.op is Op.LOAD and memory_operands(ld).mask is not None]
    if not masked:
        return {}
    info = axis_info(kernel)
    return {ld: cb for ld in masked if (cb := split_bound(ld, info)) is not None}
