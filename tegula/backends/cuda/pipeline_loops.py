"""Software pipelining of the loops whose loads feed tensor-core dots: the loads of
iteration k + S - 1 are in flight while the dot of iteration k runs (S = `num_stages`,
from `tl.range(num_stages=...)` or the launch's option).

A tile IR → tgir rewrite. For a `for` whose body loads tiles used only as operands of
dots that run on `mma.sync`, each such load becomes a ring of S shared-memory slots
(`local_alloc`) filled by `async_copy` (cp.async: masked-off elements are zero-filled,
so the load's `other` must be absent or zero):

    local_alloc A[S], B[S]
    prologue, for i < S-1: the address code at iteration lb + i*step, `async_copy` into
        slot i predicated on that iteration existing, `async_commit`
    for k ... (loop-carried address values now run S-1 iterations ahead; + read, write slots):
        async_wait(S-2)                 the copies of iteration k have landed (+ barrier)
        a = local_load A[read]          (the dot reads its operands from the slots)
        address code at k + (S-1)*step, async_copy into the write slot, async_commit,
            then the rest of the address code (the carried pointers' advance)
        the rest of the body: the dot, epilogue code ...
        read, write = (read+1) % S, (write+1) % S
    async_wait(0); local_dealloc B, A

An 8-bit wgmma operand whose copies run across the K-major order its slot must have
(a row-major fp8/int8 B, a column-major A: `pipeline_candidates.transposed_on_chip`)
gets a staging ring stored the way its copies run, and two K-major buffers: after the
wait, `local_copy B[read] -> T[turn]` transposes the landed slot and the dots read
`local_load T, turn` (the loop carries `turn`, flipped each iteration: the previous
iteration's wgmma may still read the other buffer).

A dot that runs on wgmma and only updates its accumulator (`acc = tl.dot(a, b, acc)`)
is left in flight into the next iteration (`dot_wait {pending = 1}` after it, 0 after
the loop); the copies of that iteration are then issued after the wait and a barrier,
once no warpgroup's dot reads the write slot any more. Every other wgmma dot of the body
is waited for right before the first op that reads it (`dot_wait {pending = N}`, N the
wgmma dots issued in between, which stay in flight; `async_dots.LateWait`), within its
iteration, so the slots it read are free by the next one's copies.

The *address code* is the loads' operands' backward slice inside the body: it must be
pure but for the index loads of a gather (a MoE kernel's `x_ptr + token[:, None] *
stride`, `token` loaded in the loop: `index_loads`), which are issued
with the copies of their iteration, masked off where it does not exist; the
loop-carried values it reads (the pointers advanced each iteration) must be updated
only by it and be used by nothing else in or after the loop; a slice value that the
rest of the body also uses is recomputed for the current iteration when it does not
depend on those carried values. Loops that do not fit are left alone. The write slot
was last read in iteration k-1, which every thread finished before the barrier of
iteration k's wait.

A loop given its own `num_stages` (`tl.range(..., num_stages=S)`) that has no dot is
pipelined too, as Triton does (a persistent softmax prefetching its next rows): each
of its loads whose copies move at least 4 bytes (cp.async's smallest) goes through a
ring and is read back into registers. A non-zero `other` is applied after the read
(`select(mask, slot, other)`) when the mask and `other` are defined outside the loop.

A `descriptor_load` left for TMA (sm_90a, `tma.tma_loads`) becomes a ring filled by
`tma_load` instead: each ring has a buffer of S mbarriers (`local_alloc smem<Sx1xi64>`,
`mbarrier_init` before the prologue); the copies of an iteration are one `tma_load`
per ring, signalled on the slot's mbarrier, and the body waits with `mbarrier_wait
bars, read, phase` (the loop carries the phase parity, flipped each time `read` wraps
to slot 0) instead of `async_wait`. One thread issues the copies, so before it
overwrites the write slot a CTA barrier makes sure every warp has finished reading it
(the `async_wait`'s barrier plays that part for cp.async rings). After the loop the
mbarriers are invalidated (`mbarrier_inval`) before their bytes are freed.

A load whose mask narrows its copies only through a bound along their run (a
descriptor block's `k0 + j < K`, K unknown) gets that term kept apart
(`copy_bounds.split_bound`): `async_copy ..., mask, index, bound {has_bound}`, which
the lowering issues as full-width cp.async with a computed source size.

In a flattened loop the address code's part that changes only with the outer index
(its division and what follows from it: the tile's coordinates) is carried for the
copies' iteration and recomputed on a new tile only (`pipeline_memo`).

A hint whose result is unused (`tl.multiple_of(a_ptrs, 16)`, which applies in place)
about a carried value or an address-code value is issued again with each copy's
address code, so the copies keep the alignment it claims.

A warp-specialized loop directly in a top-level loop over tiles (a persistent kernel)
keeps its rings for the whole kernel, their slots turning across tiles
(`tile_loop_rings`); that tile loop is then not pipelined itself.

The interpreter runs the result (copies complete at issue), so the rewrite is
translation-validated with no GPU.
"""
from __future__ import annotations

from typing import Optional

from ...config import knobs
from ...ir import attrs as A
from ...ir.accessors import for_bounds, for_inits, memory_operands
from ...ir.builder import Builder
from ...ir.clone import clone_instr
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import I32, I64, SmemType, shape_of
from ...passes.ir_utils import static_trip_count, users_of
from .async_dots import wait_inside
from .copy_bounds import bounded_mask
from .index_loads import load_if_live
from .pipeline_candidates import dot_operand, other_after_read, transposed_on_chip
from .pipeline_memo import memo_inits, memo_step, state_types
from .pipeline_plan import LoopPlan, plan_loop
from .pipeline_split import split_transposed_uses, undo
from .tile_loop_rings import carry_through, ring_position, tile_loop_of, yield_carried
from .warp_specialize import split_roles, wants_specialization
from .warpgroup_turns import take_turns


def pipeline_loops(kernel: Kernel, num_stages: int, num_warps: int, capability: int) -> int:
    """Pipeline every loop of `kernel` that fits (in place); returns how many were."""
    if capability < 80:
        return 0
    done = 0
    holding_rings: set[Instr] = set()  # tile loops around a loop whose rings turn across tiles
    for loop in _loops_inner_first(kernel.body):
        if loop in holding_rings:
            continue  # its own rings would sit beside the inner loop's for the whole kernel
        stages = num_stages
        explicit = isinstance(loop.attrs, A.LoopAttrs) and loop.attrs.num_stages is not None
        if explicit:
            stages = loop.attrs.num_stages
        has_dot = any(i.op is Op.DOT for i in loop.regions[0].walk())
        if not has_dot and not explicit:
            continue  # nothing feeds a dot, and no num_stages asks for prefetching
        # a loop of a known trip count needs no more slots than it has iterations (all of
        # its loads are in flight from the prologue on either way), and one of a single
        # iteration has nothing to overlap: fla's loops over `tl.cdiv(V, BV)` value blocks
        # with BV = V (chunk_bwd_kernel_dqkwg: five tiles, 224 KB of rings at 2 stages
        # for one iteration, one CTA an SM where Triton, not pipelining it, fits two)
        trips = static_trip_count(loop)
        if trips is not None:
            if trips <= 1:
                continue
            stages = min(stages, trips)
        # a load read both directly and transposed by dots gets a copy for the transpose
        # (unless wgmma reads one slot both ways)
        splits = [] if not has_dot else split_transposed_uses(loop.regions[0], users_of(kernel.body), num_warps,
                                                              capability)
        plan = plan_loop(kernel, loop, stages, num_warps, capability, without_dot=not has_dot)
        if splits and (plan is None or not all(s.load in plan.loads and s.copy in plan.loads for s in splits)):
            undo(loop.regions[0], splits)  # not pipelined with both rings: the loop keeps its one load
            plan = plan_loop(kernel, loop, stages, num_warps, capability)
        if plan is not None:
            parent = _block_of(kernel.body, loop)  # a warp-specialized split moves the loops after it
            if not plan.lagged and wants_specialization(kernel, parent, loop, plan.loads, capability, num_warps):
                plan.consumer_warps = num_warps
            elif _releases_by_arrival(plan, num_warps):
                plan.release_warps = num_warps
            nest = tile_loop_of(kernel, parent) if plan.consumer_warps else None
            if nest is not None:
                holding_rings.add(nest)
            if not plan.consumer_warps:
                uses = users_of(kernel.body)
                cache = {"kernel": kernel}
                plan.staged_transposes = {ld for ld in plan.loads if transposed_on_chip(
                    ld, plan.loads, plan.transposes, uses, num_warps, capability, cache)}
            _rewrite(kernel, parent, plan, nest)
            done += 1
    return done


def _releases_by_arrival(plan: LoopPlan, num_warps: int) -> bool:
    """Whether a loop whose rings are all TMA releases its slots by the warps' arrivals
    (`knobs.tma_release_by_arrival`; by default where its warpgroups gain from drifting
    apart: two or more of them, each computing on its dots' results within the
    iteration — attention's softmax runs while the other warpgroup's dots do). Measured
    on an H200: the attention forward at D128 +7.5%; the descriptor matmul, whose dots
    only accumulate, -1.7% with 8 warps and -14% with 4 (an mbarrier round trip
    instead of a CTA barrier, nothing to overlap)."""
    if not plan.loads or not all(ld.op is Op.DESCRIPTOR_LOAD for ld in plan.loads):
        return False
    asked = knobs.tma_release_by_arrival
    if asked is not None:
        return bool(asked)
    return num_warps >= 8 and _computes_on_dots(plan)


def _computes_on_dots(plan: LoopPlan) -> bool:
    """Whether the loop's body reads one of its wgmma dots' results itself (a late wait
    before an op of the body, not only before the yield: attention's softmax reads S;
    a two-stage matmul's accumulating dot is only carried on)."""
    end = len(plan.loop.regions[0].instrs) - 1
    return any(late.at < end for late in plan.late_waits.values())


def _loops_inner_first(block: Block) -> list[Instr]:
    """The `for` loops under `block`, inner loops before the loop holding them."""
    out: list[Instr] = []
    for ins in block.instrs:
        for region in ins.regions:
            out += _loops_inner_first(region)
        if ins.op is Op.FOR:
            out.append(ins)
    return out


def _block_of(block: Block, ins: Instr) -> Block:
    """The block whose instructions include `ins` (`block` or a region under it)."""
    found = _find_block(block, ins)
    if found is None:
        raise ValueError(f"{ins} is not in the kernel")
    return found


def _find_block(block: Block, ins: Instr) -> Optional[Block]:
    if ins in block.instrs:
        return block
    for top in block.instrs:
        for region in top.regions:
            found = _find_block(region, ins)
            if found is not None:
                return found
    return None


def _rewrite(kernel: Kernel, parent: Block, plan: LoopPlan, nest: Optional[Instr] = None) -> None:
    """Pipeline `plan.loop` (in `parent`) in place; with `nest`, the tile loop whose body
    `parent` is, its rings allocated around `nest` and turning across tiles
    (tile_loop_rings)."""
    loop, S, D = plan.loop, plan.stages, plan.distance
    body = loop.regions[0]
    iv, iters, term = body.args[0], body.args[1:], body.terminator
    lb, ub, step = for_bounds(loop)
    inits = for_inits(loop)
    iv_type = iv.type
    at = parent.instrs.index(loop)
    pingpong = plan.consumer_warps and _computes_on_dots(plan)  # of the body as it was planned
    b = Builder()
    b.loc = loop.loc
    pre = Block()
    b.set_insertion_end(pre)
    top, post = (Block(), Block()) if nest is not None else (pre, pre)
    ab = Builder(top)
    ab.loc = loop.loc

    bufs = []
    for ld in plan.loads:
        t = dot_operand(ld, plan.transposes).type
        with ab.location(ld.loc):
            bufs.append(ab.op1(Op.LOCAL_ALLOC, type=SmemType((S,) + tuple(t.shape), t.element)))
    # the K-major buffers staged rings are transposed into: two, as the dot of the
    # previous iteration may still read one while this iteration writes the other
    turned: dict[Instr, Value] = {}
    for ld in plan.loads:
        if ld in plan.staged_transposes:
            t = ld.results[0].type
            with ab.location(ld.loc):
                turned[ld] = ab.op1(Op.LOCAL_ALLOC, type=SmemType((2,) + tuple(t.shape), t.element))
    # the TMA rings' mbarriers, one per slot
    bars: dict[Instr, Value] = {}
    for ld in plan.loads:
        if ld.op is Op.DESCRIPTOR_LOAD:
            with ab.location(ld.loc):
                bars[ld] = ab.op1(Op.LOCAL_ALLOC, type=SmemType((S, 1), I64))
                ab.create(Op.MBARRIER_INIT, [bars[ld]])
    copies = any(ld.op is Op.LOAD for ld in plan.loads)  # cp.async rings
    # a slot's readers are done with it: warp-specialized, or released by arrival
    empty = None
    if plan.consumer_warps or plan.release_warps:
        empty = ab.op1(Op.LOCAL_ALLOC, type=SmemType((S, 1), I64))
        ab.create(Op.MBARRIER_INIT, [empty], A.MbarrierInitAttrs(count=plan.consumer_warps or plan.release_warps))
    # the read slot and its phase parity this tile starts at, carried from the last tile's
    ring_state = carry_through(nest, [ab.constant(0, I32), ab.constant(0, I32)]) if nest is not None else None

    stepped: list[Value] = []  # the memo's state, stepped by the loop's copies
    copy_inputs = _copy_inputs(plan)  # the address code the copies read; the rest advances carried values

    def issue(bb: Builder, mapping: dict[Value, Value], iteration: Value, slot: Value,
              empty_phase: Optional[Value] = None, memo_state: Optional[list[Value]] = None) -> None:
        """The address code for `iteration` and its copies into `slot`, one group; with
        `empty_phase`, the copies wait for the slot's consumers, when they are issued;
        with `memo_state`, the coarse part of the code is stepped from the carried state."""
        skipped: set[Instr] = set()
        if memo_state is not None and plan.memo is not None:
            stepped.extend(memo_step(bb, plan.memo, memo_state, mapping))
            skipped = plan.memo.skipped
        # whether `iteration` exists: before the address code where its index loads need
        # it, else after it (where it always was: the PTX of other loops stays the same)
        live = bb.op1(Op.LT, iteration, ub) if plan.index_loads else None
        for ins in plan.slice:
            if ins not in skipped and ins in copy_inputs:
                if ins in plan.index_loads:
                    bb.insert(load_if_live(bb, ins, mapping, live))
                else:
                    bb.insert(clone_instr(ins, mapping))
        outer = bb
        for ins in plan.hints:
            bb.insert(clone_instr(ins, mapping))
        if live is None:
            live = bb.op1(Op.LT, iteration, ub)
        if empty_phase is not None:
            guarded = Block()
            bb = Builder(guarded)
            bb.loc = outer.loc
            bb.create(Op.MBARRIER_WAIT, [empty, slot, empty_phase],
                      A.MbarrierWaitAttrs(issuer_only=bool(plan.release_warps)))
        for ld, buf in zip(plan.loads, bufs):
            if ld in bars:
                with bb.location(ld.loc):
                    operands = [mapping.get(v, v) for v in ld.operands]
                    bb.create(Op.TMA_LOAD, [buf, slot, bars[ld], live, *operands],
                              A.TmaLoadAttrs(transposed=ld in plan.transposes))
                continue
            with bb.location(ld.loc):
                perm = plan.transposes.get(ld)
                mem = memory_operands(ld)
                ptr = mapping.get(mem.pointer, mem.pointer)
                split = plan.bounds.get(ld)
                if split is None:
                    mask = mapping.get(mem.mask, mem.mask) if mem.mask is not None else None
                    bound: list[Value] = []
                else:  # the mask's uniform terms, and the bound apart (copy_bounds)
                    mask, bound = bounded_mask(bb, split, mapping, shape_of(mem.pointer.type))
                if perm is not None:  # copy the transposed tile: transpose its addresses
                    ptr = bb.op1(Op.PERMUTE, ptr, attrs=perm.attrs)
                    mask = bb.op1(Op.PERMUTE, mask, attrs=perm.attrs) if mask is not None else None
                    bound = [bb.op1(Op.PERMUTE, v, attrs=perm.attrs) for v in bound]
                pred = bb.splat(live, shape_of(dot_operand(ld, plan.transposes).type))
                if mask is not None:
                    pred = bb.op1(Op.AND, mask, pred)
                bb.create(Op.ASYNC_COPY, [buf, slot, ptr, pred, *bound],
                          A.AsyncCopyAttrs(has_mask=True, has_bound=bool(bound)))
        if copies:
            bb.create(Op.ASYNC_COMMIT, [])
        if empty_phase is not None:
            bb.yield_([])
            outer.insert(Instr(Op.IF, [live], [], None, [guarded, Block(instrs=[Instr(Op.YIELD, [], [], None, [],
                                                                                    outer.loc)])], outer.loc))
        # the carried values' updates after the copies: computed before them, the old
        # and new pointers are both live across the copies, and ptxas then updates the
        # copies' address registers in place right after them, each update waiting for
        # its cp.async to read the register (the 128x128x64 8-warp matmul lost 6%)
        for ins in plan.slice:
            if ins not in skipped and ins not in copy_inputs:
                outer.insert(clone_instr(ins, mapping))

    # prologue: iterations 0 .. D-1
    current = {iters[k]: inits[k] for k in plan.ahead}
    lag_inits: dict[int, list[Value]] = {k: [] for k in plan.lagged}  # iteration i's value, i < D
    for i in range(D):
        for k in plan.lagged:
            lag_inits[k].append(current[iters[k]])
        it = lb if i == 0 else b.op1(Op.ADD, lb, b.op1(Op.MUL, b.constant(i, iv_type), step))
        mapping: dict[Value, Value] = {iv: it, **current}
        if ring_state is None:
            issue(b, mapping, it, b.constant(i, I32))
        else:  # the slots may still hold the last tile's blocks: wait for them
            issue(b, mapping, it, *ring_position(b, *ring_state, i, S, D))
        current = {iters[k]: mapping.get(term.operands[k], term.operands[k]) for k in plan.ahead}
    memo_init = memo_inits(b, plan.memo, mapping, it) if plan.memo is not None else []

    # the pipelined loop
    new_body = Block()
    n_iv = new_body.add_arg(iv_type, iv.name)
    n_iters = [new_body.add_arg(a.type, a.name) for a in iters]
    read, write = new_body.add_arg(I32), new_body.add_arg(I32)
    phase = new_body.add_arg(I32) if bars else None  # parity of the read slot's mbarrier phase
    empty_phase = new_body.add_arg(I32) if empty is not None else None  # ... and of the write slot's empty one
    memo_state = [new_body.add_arg(t) for t in state_types(plan.memo)] if plan.memo is not None else None
    turn = new_body.add_arg(I32) if turned else None  # which transposed buffer this iteration writes
    # each lagged carried value's values of this iteration and the D-1 after it (the
    # carried value itself is iteration + D's)
    lags = {k: [new_body.add_arg(iters[k].type, iters[k].name) for _ in range(D)] for k in plan.lagged}
    nb = Builder(new_body)
    nb.loc = loop.loc
    M: dict[Value, Value] = {iv: n_iv, **dict(zip(iters, n_iters))}
    if copies:
        nb.create(Op.ASYNC_WAIT, [], A.AsyncWaitAttrs(pending=D - 1))
    for ld, bar in bars.items():
        with nb.location(ld.loc):
            nb.create(Op.MBARRIER_WAIT, [bar, read, phase])
    for ld, buf in zip(plan.loads, bufs):
        with nb.location(ld.loc):
            if ld in turned:  # transposed from the landed staging slot (`local_copy`)
                nb.create(Op.LOCAL_COPY, [buf, read, turned[ld], turn])
                value = nb.op1(Op.LOCAL_LOAD, turned[ld], turn)
            else:
                value = nb.op1(Op.LOCAL_LOAD, buf, read)
            after = other_after_read(ld) if ld.op is Op.LOAD else None
            if after is not None:
                # the copy zero-filled the masked-off elements; the load's `other`
                # (mask and value defined outside the loop, see prefetchable)
                value = nb.op1(Op.SELECT, after[0], value, after[1])
            M[dot_operand(ld, plan.transposes)] = value
    ahead_iv = nb.op1(Op.ADD, n_iv, nb.op1(Op.MUL, nb.constant(D, iv_type), step))
    ahead_map = dict(M)
    ahead_map[iv] = ahead_iv
    for k, line in lags.items():  # the body computes with this iteration's value
        M[iters[k]] = line[0]
    # The write slot was read by the dots of the previous iteration. Synchronous dots
    # finished before this iteration's barrier, so the copies go first. A dot left in
    # flight (wgmma) is only known finished after this iteration's dot_wait(1), in
    # every warpgroup after a barrier: the copies go there.
    last_async = max((body.instrs.index(d) for d in plan.async_dots.values()), default=-1)

    def release_and_issue(barrier: bool) -> None:
        """The copies into the write slot once every warp is done reading it: after a CTA
        barrier (`barrier`), or, warp-specialized, each warp's arrival on its empty
        mbarrier, which the copies wait for."""
        if empty is not None:
            nb.create(Op.MBARRIER_ARRIVE, [empty, write])
        elif barrier:
            nb.create(Op.DEBUG_BARRIER, [])
        issue(nb, ahead_map, ahead_iv, write, empty_phase, memo_state)
    if last_async < 0:
        release_and_issue(barrier=not copies)  # a cp.async ring's wait has its barrier
    members = set(plan.slice)

    def wait_late_dots(position: int) -> None:
        """The dots first read by the body's op at `position`, waited for before it (in
        issue order), the dots issued after each still in flight."""
        for d, late in plan.late_waits.items():
            if late.at == position and d.results[0] in M:
                with nb.location(d.loc):
                    M[d.results[0]] = ahead_map[d.results[0]] = nb.op1(
                        Op.DOT_WAIT, M[d.results[0]], attrs=A.AsyncWaitAttrs(pending=late.pending))
    for at_ins, ins in enumerate(body.instrs[:-1]):
        wait_late_dots(at_ins)
        if ins in plan.loads or ins in plan.transposes.values() or (ins in members and ins not in plan.keep):
            continue
        if ins in plan.hints and (ins.operands[0] not in M or ins.operands[0] in iters):
            continue  # about the iteration ahead's values: issued with its copies
        copy = nb.insert(clone_instr(ins, M))
        if ins.op is Op.IF:  # an epilogue reading an accumulator in flight waits for it
            for d in plan.async_dots.values():
                waited = wait_inside(copy, M[d.results[0]]) if d.results[0] in M else None
                if waited is not None:
                    M[d.results[0]] = ahead_map[d.results[0]] = waited
        if ins in plan.async_dots.values():
            # in flight into the next iteration; the one before it has finished
            M[ins.results[0]] = nb.op1(Op.DOT_WAIT, M[ins.results[0]], attrs=A.AsyncWaitAttrs(pending=1))
            ahead_map[ins.results[0]] = M[ins.results[0]]
        if at_ins == last_async:
            release_and_issue(barrier=True)
    wait_late_dots(len(body.instrs) - 1)
    one, size, zero = nb.constant(1, I32), nb.constant(S, I32), nb.constant(0, I32)

    def advance(slot: Value) -> Value:
        nxt = nb.op1(Op.ADD, slot, one)
        return nb.op1(Op.SELECT, nb.op1(Op.EQ, nxt, size), zero, nxt)
    yields = [ahead_map.get(v, v) if k in plan.ahead else M.get(v, v) for k, v in enumerate(term.operands)]
    next_read, next_write = advance(read), advance(write)
    slots = [next_read, next_write]

    def flip(p: Value, slot: Value, first: Value) -> Value:
        """A slot's phase parity flips each time the slots come round to the first again."""
        return nb.op1(Op.SELECT, nb.op1(Op.EQ, slot, first), nb.op1(Op.XOR, p, one), p)
    if phase is not None:
        slots.append(flip(phase, next_read, zero))
    if empty_phase is not None:
        slots.append(flip(empty_phase, next_write, nb.constant(D, I32)))
    turns = [nb.op1(Op.XOR, turn, one)] if turn is not None else []
    lag_yields = [v for k, line in lags.items() for v in line[1:] + [n_iters[k]]]
    nb.yield_(yields + slots + stepped + turns + lag_yields)
    new_inits = [current[iters[k]] if k in plan.ahead else v for k, v in enumerate(inits)]
    turn_init = [b.constant(0, I32)] if turn is not None else []
    if ring_state is None:
        slot_inits = [b.constant(0, I32), b.constant(D, I32)] + [b.constant(0, I32) for p in (phase, empty_phase)
                                                                 if p is not None]
    else:  # the copies of iteration g + D wait with iteration g's full parity
        slot_inits = [ring_state[0], ring_position(b, *ring_state, D, S, D)[0], ring_state[1], ring_state[1]]
    lag_init = [v for k in plan.lagged for v in lag_inits[k]]
    new_loop = Instr(Op.FOR, [lb, ub, step, *new_inits, *slot_inits, *memo_init, *turn_init, *lag_init],
                     [Value(r.type, r.name) for r in loop.results] + [Value(I32) for _ in slot_inits]
                     + [Value(v.type) for v in memo_init] + [Value(I32) for _ in turn_init]
                     + [Value(v.type) for v in lag_init],
                     loop.attrs, [new_body], loop.loc)
    b.insert(new_loop)
    results = dict(zip(loop.results, new_loop.results))
    first_lag = len(new_loop.results) - len(lag_init)
    for j, k in enumerate(plan.lagged):  # after the last iteration, its first lagged value is the loop's
        results[loop.results[k]] = new_loop.results[first_lag + j * D]
    for k in sorted(plan.async_dots):
        results[loop.results[k]] = b.op1(Op.DOT_WAIT, new_loop.results[k], attrs=A.AsyncWaitAttrs(pending=0))
    if copies:
        b.create(Op.ASYNC_WAIT, [], A.AsyncWaitAttrs(pending=0))
    if ring_state is not None:  # the next tile reads on from the slot after this one's last
        n = len(loop.results)
        yield_carried(nest, [new_loop.results[n], new_loop.results[n + 2]])
    fb = b if nest is None else Builder(post)
    fb.loc = loop.loc
    for bar in reversed(list(bars.values()) + ([empty] if empty is not None else [])):
        fb.create(Op.MBARRIER_INVAL, [bar])
        fb.create(Op.LOCAL_DEALLOC, [bar])
    for buf in reversed(bufs + list(turned.values())):
        fb.create(Op.LOCAL_DEALLOC, [buf])
    parent.instrs[at:at + 1] = pre.instrs
    if nest is not None:
        outer_at = kernel.body.instrs.index(nest)
        kernel.body.instrs[outer_at:outer_at + 1] = top.instrs + [nest] + post.instrs
    _replace_uses(kernel, results)
    if plan.consumer_warps and split_roles(kernel, bufs, empty, plan.consumer_warps) and pingpong:
        take_turns(_block_of(kernel.body, new_loop), new_loop, plan.consumer_warps)


def _copy_inputs(plan: LoopPlan) -> set[Instr]:
    """The address code's ops the copies (and the hints issued with them) read, directly
    or through one another; the others only compute the carried values of the
    iteration after (the pointers' advance)."""
    producer = {r: ins for ins in plan.slice for r in ins.results}
    needed: set[Instr] = set()
    work = [v for ins in plan.loads + plan.hints for sub in ins.walk() for v in sub.operands]
    while work:
        ins = producer.get(work.pop())
        if ins is not None and ins not in needed:
            needed.add(ins)
            work.extend(v for sub in ins.walk() for v in sub.operands)
    return needed


def _replace_uses(kernel: Kernel, mapping: dict[Value, Value]) -> None:
    for ins in kernel.walk():
        ins.operands = [mapping.get(v, v) for v in ins.operands]
