"""Loop-invariant dot operands staged once in shared memory (sm_90a, wgmma).

A tile loaded before a loop and read there only as an operand of dots (attention's Q
in the forward; K and V in the backward's dK/dV kernel, Triton's tutorial 06) is
otherwise held in registers for the whole loop: a B operand then keeps its dots off
wgmma altogether (wgmma reads B from shared memory only), and register A operands
compete with the accumulators. Triton stages such operands in shared memory on Hopper.
So is the B operand of a dot outside any loop (the last block's P·V after a rotated
attention loop, in the kernel's body, in a warp-specialized kernel's consumer region,
or in the body of a persistent kernel's loop over tiles): on wgmma, its accumulator
keeps the layout the loop's wgmma gave it, where mma.sync would move it through shared
memory twice. A lone dot's A (its load in the dot's own block) is staged beside its B
and read in place, where registers would take a conversion through scratch; its copy
is done by the threads (`through_registers`: vector loads, then stores into the slot)
and issued after the cp.async copies staged behind it.

`stage_invariant_operands` rewrites such a load into

    buf = local_alloc smem<1 x shape>
    async_copy buf, 0, ptrs[, mask]        (masked-off elements zero-filled)
    async_commit
    ... (up to the first op reading x)
    async_wait N                           (N: groups committed since, still in flight;
                                            the barrier pass adds the CTA barrier)
    x = local_load buf, 0                  (the dots read it in place, see lower_shared)
    ... the loops ...
    local_dealloc buf                      (after the last top-level op that reads x)

for every B operand, and for A operands when registers are short: when one loop's
dot accumulators and the register A operands live across it would take more than half
of a thread's 255 registers (K and V next to dK and dV, 4 warps: 64 + 128). Loops are
counted one at a time: a Q beside the forward's S and O accumulators (D128, 8 warps:
32 + 96) stays in registers even where a causal forward has two loops; staged, its
wgmma reads A from shared memory too, which cost the D128 forward 23% on the H100.
Each dot must still run on wgmma with the operand in shared memory (`choose_mma`);
the load's `other`, if any, must be zero (the copy's fill).
"""
from __future__ import annotations

from typing import Optional

from ...config import knobs
from ...ir import attrs as A
from ...ir.accessors import memory_operands
from ...ir.builder import Builder
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op, info
from ...ir.types import I32, PointerType, SmemType, TileType, element_of
from ...passes.ir_utils import users_of
from .mma import choose_mma
from .pipeline_candidates import is_zero
from .slot_views import slot_read
from .tile_prefetch import StagedCopy, hoist_tile_copy, prefetch_next_tile

# registers per thread the accumulators and register A operands of a loop may take
# before its invariant A operands move to shared memory
REGISTER_BUDGET = 128


def stage_invariant_operands(kernel: Kernel, num_warps: int, capability: int,
                             prefetch_tiles: bool = True) -> int:
    """Stage the loop-invariant dot operands that qualify (in place); returns how many.
    `prefetch_tiles`: those of a persistent kernel's tile loop read in its inner loops
    are copied one tile ahead, those read after them copied under them (`tile_prefetch`)."""
    if capability < 90 or not knobs.wgmma or not knobs.dot_tensor_cores:
        return 0
    uses = users_of(kernel.body)
    done = 0
    for block, once, tile_loop in _blocks(kernel.body):
        picked, lone_a = _pick(block, uses, num_warps, capability, once)
        staged = [_stage(block, load, uses, through_registers=load in lone_a) for load in picked]
        for st in staged:
            if st.copy.attrs.through_registers:
                _issue_after_async_copies(block, st)
        # each wait leaves in flight the groups committed after its own, counted once
        # all are staged (a later staging adds its group before an earlier one's wait)
        for st in staged:
            st.wait.attrs = A.AsyncWaitAttrs(pending=_groups_after(block, block.instrs.index(st.commit) + 1,
                                                                   block.instrs.index(st.wait)))
        if tile_loop is not None and prefetch_tiles:
            parent, loop = tile_loop
            for st in staged:
                # (an operand read in the body itself, after its loops, stays per tile,
                # its copy moved up to run under them: `hoist_tile_copy`)
                if _read_in_loops(block, st) and prefetch_next_tile(parent, loop, st):
                    # its group, committed in the tile before, is the oldest in flight at
                    # the body's top: the wait leaves those the body commits before it
                    st.wait.attrs = A.AsyncWaitAttrs(pending=_groups_after(block, 0, block.instrs.index(st.wait)))
                elif not _read_in_loops(block, st):
                    hoist_tile_copy(block, st)
            for st in staged:  # a wait behind a moved copy now leaves it in flight
                if st.commit in block.instrs:
                    st.wait.attrs = A.AsyncWaitAttrs(pending=_groups_after(
                        block, block.instrs.index(st.commit) + 1, block.instrs.index(st.wait)))
        done += len(picked)
    return done


def _read_in_loops(block: Block, st: StagedCopy) -> bool:
    """Whether every op of `block` reading the staged value is a loop."""
    readers = [ins for ins in block.instrs if ins is not st.value.owner
               and any(st.value in sub.operands for sub in ins.walk())]
    return bool(readers) and all(ins.op is Op.FOR for ins in readers)


def _blocks(block: Block, once: bool = True,
            tile_loop: Optional[tuple[Block, Instr]] = None) -> list[tuple[Block, bool, Optional[tuple[Block, Instr]]]]:
    """Every block under `block` (itself included), with whether it runs at most once
    per program or per tile: not inside a loop (the kernel's body, a branch of an `if`
    there, such as a warp-specialized kernel's consumer region), or in the body of a
    loop over tiles, one that holds a loop (a persistent kernel's: the buffer's copy
    and its CTA barriers come once per tile, around the tile's own loop); and for such
    a loop's body, (the block holding the loop, the loop), else None."""
    out = [(block, once, tile_loop)]
    for ins in block.instrs:
        for region in ins.regions:
            tiles = ins.op is Op.FOR and any(sub.op is Op.FOR for sub in region.walk())
            out += _blocks(region, (once and ins.op is Op.IF) or tiles, (block, ins) if tiles else None)
    return out


def _top_level_owner(block: Block, ins: Instr) -> Optional[Instr]:
    """The op of `block` that `ins` is, or is nested in (None: not in `block`)."""
    for top in block.instrs:
        if top is ins or any(sub is ins for sub in top.walk()):
            return top
    return None


def _operand_roles(load: Instr, block: Block, uses: dict[Value, list[Instr]],
                   once: bool) -> Optional[list[tuple[Instr, int]]]:
    """(dot, operand index) for every user of the load, when all are dots that follow it
    in `block` reading it as A or B, inside loops or in `block` itself when that runs
    once per program (`once`: staged in a loop body, the buffer would be rewritten each
    iteration while slower warps may still read it); else None."""
    res = load.results[0]
    roles = []
    for u in uses.get(res, []):
        if u.op is not Op.DOT or u.operands[2] is res:
            return None
        ks = [k for k in (0, 1) if u.operands[k] is res]
        top = _top_level_owner(block, u)
        if len(ks) != 1 or top is None or (top is u and not once) \
                or (top is not u and top.op is not Op.FOR):
            return None
        if block.instrs.index(top) < block.instrs.index(load):
            return None
        roles.append((u, ks[0]))
    return roles or None


def _qualifies(load: Instr) -> bool:
    if load.op is not Op.LOAD or load.attrs.volatile:
        return False
    res = load.results[0]
    if not isinstance(res.type, TileType) or len(res.type.shape) != 2:
        return False
    mem = memory_operands(load)
    ptr_elem = element_of(mem.pointer.type)
    return isinstance(ptr_elem, PointerType) and ptr_elem.address_space == 1 and (
        mem.other is None or is_zero(mem.other))


def _regs(v: Value, num_warps: int) -> int:
    """32-bit registers per thread a tile takes spread over the CTA."""
    t = v.type
    return max(1, t.numel * element_of(t).bytes // (4 * 32 * num_warps))


def _runs_on_wgmma(dot: Instr, k: int, num_warps: int, capability: int, b_staged: bool = False) -> bool:
    """Whether `dot` would run on wgmma with its operand `k` staged (an A staged next to
    a B that is not in a slot, nor staged with it, gains nothing: wgmma needs B in
    shared memory)."""
    if k == 0 and not (b_staged or _in_shared(dot.operands[1])):
        return False
    choice = choose_mma(dot, num_warps, capability, b_in_shared=True, a_in_shared=k == 0)
    return choice is not None and choice.version == 3


def _pick(block: Block, uses: dict[Value, list[Instr]], num_warps: int, capability: int,
          once: bool) -> tuple[list[Instr], set[Instr]]:
    """The loads of `block` to stage, and which of them are a lone dot's A (copied
    through registers, see `_stage`)."""
    candidates = [(ins, _operand_roles(ins, block, uses, once)) for ins in block.instrs if _qualifies(ins)]
    candidates = [(ins, roles) for ins, roles in candidates if roles is not None]
    as_b = [(ins, roles) for ins, roles in candidates if any(k == 1 for _d, k in roles)]
    staged_b = [ins for ins, roles in as_b if all(_runs_on_wgmma(dot, k, num_warps, capability) for dot, k in roles)]
    b_staged = {dot for ins, roles in as_b if ins in staged_b for dot, _k in roles}
    a_candidates, lone_a = [], []
    for ins, roles in candidates:
        if any(k == 1 for _d, k in roles):
            continue
        if any(dot in block.instrs for dot, _k in roles):
            # A of dots in `block` itself (a lone dot): read from shared memory in
            # place, where registers would take a conversion through scratch (its
            # stores, a barrier, the fragment loads) — when B is in a slot too
            if all(dot in block.instrs and _runs_on_wgmma(dot, 0, num_warps, capability, b_staged=dot in b_staged)
                   for dot, _k in roles):
                lone_a.append(ins)
        elif all(_runs_on_wgmma(dot, k, num_warps, capability) for dot, k in roles):
            a_candidates.append((ins, roles))
    if not a_candidates:
        return staged_b + lone_a, set(lone_a)
    # The register pressure of each loop an A candidate is read in: its own dots'
    # accumulators and the A candidates live across it. Loops run one after the other
    # (a causal forward's unmasked and diagonal loops), so their accumulators do not
    # add up: an A operand moves to shared memory only for a loop over the budget.
    at = {ins: i for i, ins in enumerate(block.instrs)}
    read_in = {ins: {_top_level_owner(block, d) for d, _k in roles} for ins, roles in a_candidates}
    staged_a = set()
    for loop in set().union(*read_in.values()):
        live = [ins for ins, loops in read_in.items() if at[ins] < at[loop] and any(at[lp] >= at[loop] for lp in loops)]
        accs = {d.results[0] for d in loop.walk() if d.op is Op.DOT}
        pressure = sum(_regs(v, num_warps) for v in accs) + sum(_regs(ins.results[0], num_warps) for ins in live)
        if pressure > REGISTER_BUDGET:
            staged_a.update(ins for ins, loops in read_in.items() if loop in loops)
    return staged_b + lone_a + [ins for ins, _r in a_candidates if ins in staged_a], set(lone_a)


def _free_position(block: Block, alloc: Instr, readers: list[Instr]) -> int:
    """Where the buffer of `alloc` is freed: after the last top-level op that reads it,
    and after what that op's own rings free there (buffers allocated after this one,
    their waits), so that buffers are freed in the reverse order of their allocation."""
    mine = block.instrs.index(alloc)
    at = max(block.instrs.index(r) for r in readers) + 1
    while at < len(block.instrs):
        ins = block.instrs[at]
        if ins.op is Op.LOCAL_DEALLOC:
            owner = ins.operands[0].owner
            if not (owner in block.instrs and block.instrs.index(owner) > mine):
                break
        elif ins.op not in (Op.ASYNC_WAIT, Op.DOT_WAIT, Op.MBARRIER_INVAL):
            break
        at += 1
    return at


def _in_shared(v: Value) -> bool:
    """Whether a dot operand is read in place from a slot (directly, or through a
    transposed view: `slot_views`)."""
    return slot_read(v) is not None


def _stage(block: Block, load: Instr, uses: dict[Value, list[Instr]], through_registers: bool) -> StagedCopy:
    """Stage `load` (see the module docstring); returns the ops made, the wait's count
    of groups left in flight for the caller to set."""
    res = load.results[0]
    mem = memory_operands(load)
    b = Builder()
    b.loc = load.loc
    staged = Block()
    b.set_insertion_end(staged)
    t = res.type
    buf = b.op1(Op.LOCAL_ALLOC, type=SmemType((1,) + tuple(t.shape), element_of(t)))
    slot = b.constant(0, I32)
    operands = [buf, slot, mem.pointer] + ([mem.mask] if mem.mask is not None else [])
    # A lone dot's A (`through_registers`) is copied by the threads themselves (vector
    # loads, then stores into the slot), not by cp.async: its B is in flight on cp.async
    # meanwhile, and the kernel keeps the 16-byte global loads Triton's lone dots have
    # (its test_dot asserts `ld.global.v4` in their PTX).
    copy = b.create(Op.ASYNC_COPY, operands, A.AsyncCopyAttrs(has_mask=mem.mask is not None,
                                                              through_registers=through_registers))
    commit = b.create(Op.ASYNC_COMMIT, [])
    at = block.instrs.index(load)
    block.instrs[at:at + 1] = staged.instrs
    readers = [_top_level_owner(block, u) for u in uses.get(res, [])]
    # The wait goes right before the first reader, not after the copy: copies staged
    # one after another (the backward's K and V) and a loop's prologue copies are then
    # in flight together, and the code in between runs under them.
    first = min(block.instrs.index(r) for r in readers)
    arrive = Builder()
    arrive.loc = load.loc
    waited = Block()
    arrive.set_insertion_end(waited)
    wait = arrive.create(Op.ASYNC_WAIT, [], A.AsyncWaitAttrs(pending=0))
    value = arrive.op1(Op.LOCAL_LOAD, buf, slot)
    block.instrs[first:first] = waited.instrs
    dealloc = Instr(Op.LOCAL_DEALLOC, [buf], [], None, [], load.loc)
    block.instrs.insert(_free_position(block, buf.owner, readers), dealloc)
    for u in uses.get(res, []):
        u.operands = [value if o is res else o for o in u.operands]
    return StagedCopy(buf.owner, copy, commit, wait, value, dealloc)


def _issue_after_async_copies(block: Block, st: StagedCopy) -> None:
    """Move a copy through registers (and its commit) down past the ops after it, up to
    the first wait, op with side effects or op with regions: its stores wait for its
    loads to land, so issued where its load was it would hold back the cp.async copies
    staged after it (a lone dot's B behind its A: the two loads' latencies then add up;
    measured on an H200, a 128x128x64 fp16 lone dot over 8 warps took 161 us for 8192
    programs against 138 us converting A in registers)."""
    i = block.instrs.index(st.copy)
    assert block.instrs[i + 1] is st.commit
    j = i + 2
    while j < len(block.instrs):
        ins = block.instrs[j]
        if ins.regions or not (ins.op in (Op.ASYNC_COPY, Op.ASYNC_COMMIT, Op.LOCAL_ALLOC) or info(ins.op).pure):
            break
        j += 1
    block.instrs[j:j] = [st.copy, st.commit]
    del block.instrs[i:i + 2]


def _groups_after(block: Block, start: int, end: int) -> int:
    """How many copy groups `block.instrs[start:end]` commits, which a wait at `end` for
    a group committed before `start` may leave in flight: those of its top-level ops,
    or 0 (wait for all) where one of its regions commits or waits for groups itself."""
    between = block.instrs[start:end]
    if any(sub.op in (Op.ASYNC_COMMIT, Op.ASYNC_WAIT) for ins in between if ins.regions for sub in ins.walk()):
        return 0
    return sum(ins.op is Op.ASYNC_COMMIT for ins in between)

