"""Which wgmma dots of a pipelined loop run while other code does (`async_dots`):
those that stay in flight into the next iteration (`pipeline_loops` leaves a
`dot_wait {pending = 1}` after each and a full wait after the loop), and where each
other one is waited for (`dot_wait {pending = N}` before the first op reading it).

A dot stays in flight across iterations only if it runs on wgmma with a pipelined B and
its result only feeds the next iteration's same dot as its accumulator; an A operand in
registers computed in the loop must not be redefined while its dot may still run
(triton#9433's hazard). Which way round a slot's copies run does not matter: an 8-bit
operand's slot is stored K-major whatever they do (`lower_shared.buffer_layout`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...ir import attrs as A
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from .mma import MmaChoice, choose_mma, staged_register_b
from .pipeline_candidates import dot_operand, zeroed_when
from .slot_views import viewed_both_ways


def _chained(dot: Instr, body: Block, uses: dict[Value, list[Instr]]) -> bool:
    """Whether a dot of `body` only carries its accumulator to the next iteration: its
    result is yielded once, as the loop-carried value its accumulator operand reads —
    directly, or restarted from zero by a `select` only it reads (`zeroed_when`: the
    wgmma's scale-d then does the select) — and that carried value is read by nothing
    else. Its result may also be read inside an `if` of the body (a flattened nest's
    epilogue on the last inner iteration): the pipeliner waits for the dot there."""
    term = body.terminator
    res = dot.results[0]
    if term.operands.count(res) != 1:
        return False
    carried = body.args[1 + term.operands.index(res)]
    acc = dot.operands[2]
    if acc is carried:
        read_alone = uses.get(carried, []) == [dot]
    else:
        reset = zeroed_when(acc)
        read_alone = (reset is not None and reset[1] is carried and uses.get(acc, []) == [dot]
                      and uses.get(carried, []) == [acc.owner])
    if not read_alone:
        return False
    top = {sub: ins for ins in body.instrs for sub in ins.walk()}
    return all(u is term or (top.get(u) is not None and top[u].op is Op.IF and top[u] is not u)
               for u in uses.get(res, []))


@dataclass(frozen=True)
class LateWait:
    """Where a wgmma dot of a pipelined body that is not left in flight into the next
    iteration is waited for: before the body's op at position `at` (the first to read
    its result; the terminator's position when only the yield does), with `pending`
    groups — the wgmma dots issued between the two — still allowed in flight there."""
    at: int
    pending: int


@dataclass
class AsyncDots:
    """The wgmma dots of a pipelined loop that run asynchronously: `carried`, those in
    flight into the next iteration (by their loop-carried index), and `late`, the others,
    each waited for where its result is first read (`LateWait`)."""
    carried: dict[int, Instr] = field(default_factory=dict)
    late: dict[Instr, LateWait] = field(default_factory=dict)


def async_dots(kernel: Kernel, loop: Instr, loads: set[Instr], transposes: dict[Instr, Instr],
               uses: dict[Value, list[Instr]], num_warps: int, capability: int,
               wait_at_use: bool = True, carry: bool = True) -> AsyncDots:
    """The loop's wgmma dots that run while other code of the body does.

    Carried: wgmma dots with a pipelined B whose result only feeds the next iteration's
    same dot as its accumulator (`acc = tl.dot(a, b, acc)`, `acc += tl.dot(a, b)`), left
    in flight across the back edge.

    Late: every other wgmma dot (not one that waits at once, `MmaChoice.waits_at_once`:
    an fp8 one with promotion, which waits for its own partial sums, or one with an f16
    accumulator) is waited for right before the first op that reads its result, with
    the wgmma dots issued in between still in flight (`wait_group N` completes groups in
    order). So the dots of one iteration overlap the code between them and their uses:
    a body written as FlashAttention-3 rotates attention (issue S_j = Q·K_j, then
    O += P_{j-1}·V_{j-1}, then the softmax of S_j) runs the softmax under the second
    dot. Attention's backward keeps dV's dot running under dP's, and dK's under the
    next iteration's loads and first dot, as Triton schedules them. Without
    `wait_at_use` a late dot is waited for right after it. Without `carry` (a loop of
    two stages, whose copies cannot run S-2 iterations ahead) no dot is carried: each
    is late.

    An A operand in registers computed in the loop must not be redefined while its dot
    may still run. A late dot is waited for in its own iteration, before the A value's
    next definition (the lowering keeps its registers alive up to the wait). A carried
    dot needs a wait that completes it between the two, around the loop: a late dot's
    wait completes every group issued before that dot — or it is not carried."""
    body = loop.regions[0]
    term = body.terminator
    source = _slot_sources(body, loads, transposes, uses, num_warps, capability)
    wgmma = _wgmma_choices(kernel, body, source, num_warps, capability)
    order = body.instrs
    at = {d: order.index(d) for d in wgmma}
    top = {sub: ins for ins in order for sub in ins.walk()}
    # in body order (as everything below), so the waits come out the same every compile
    chained = [d for d, choice in wgmma.items() if carry and not choice.waits_at_once and _chained(d, body, uses)]

    def first_use(d: Instr) -> Optional[int]:
        users = [top.get(u, term) for u in uses.get(d.results[0], [])]
        return min((order.index(u) for u in users), default=None)

    def late_wait(d: Instr, use: int) -> LateWait:
        if not wait_at_use:
            use = at[d] + 1
        return LateWait(use, sum(1 for o in wgmma if at[d] < at[o] < use))

    out = AsyncDots()
    # (issue, wait) positions of the dots waited for in their own iteration
    waits: list[tuple[int, int]] = []
    for d, choice in wgmma.items():
        if choice.waits_at_once:
            waits.append((at[d], at[d]))
        elif d not in chained and (use := first_use(d)) is not None:
            out.late[d] = late_wait(d, use)
            waits.append((at[d], out.late[d].at))
    # where each value computed in the body is (re)defined: its top-level op's position
    position = {r: i for i, ins in enumerate(order) for sub in ins.walk() for r in sub.results}
    for d in chained:
        a = d.operands[0]
        if a not in source and a in position:
            # register A computed in the loop, redefined next iteration at its definition:
            # a wait in between completes d if its dot was issued after d, or if it comes
            # (next iteration) before the redefinition
            defined = position[a]
            if not any(issued > at[d] or waited <= defined for issued, waited in waits):
                out.late[d] = late_wait(d, order.index(term))
                continue
        out.carried[term.operands.index(d.results[0])] = d
    return out


def _slot_sources(body: Block, loads: set[Instr], transposes: dict[Instr, Instr], uses: dict[Value, list[Instr]],
                  num_warps: int, capability: int) -> dict[Value, tuple[Instr, bool]]:
    """Dot operand → (its pipelined load, whether the operand is the loaded tile's
    transpose): the operands a dot of the loop reads from a ring's slot."""
    source = {dot_operand(ld, transposes): (ld, ld in transposes) for ld in loads}
    for ld in loads:
        view = viewed_both_ways(ld.results[0], body, uses, num_warps, capability)
        if view is not None:
            source[view.results[0]] = (ld, True)
    return source


def _wgmma_choices(kernel: Kernel, body: Block, source: dict[Value, tuple[Instr, bool]], num_warps: int,
                   capability: int) -> dict[Instr, MmaChoice]:
    """The body's top-level dots that run on wgmma with B in a slot, with their
    instruction choice (a B stored from registers into the dot's scratch is waited for
    by the dot's own lowering, `mma.staged_register_b`: the next op may reuse it)."""
    out = {}
    for ins in body.instrs:
        if ins.op is not Op.DOT:
            continue
        a_src, b_src = source.get(ins.operands[0]), source.get(ins.operands[1])
        choice = choose_mma(ins, num_warps, capability, b_in_shared=b_src is not None,
                            a_in_shared=a_src is not None)
        if choice is not None and choice.version == 3 and not staged_register_b(choice, b_src is not None):
            out[ins] = choice
    return out


def wait_inside(branch: Instr, pending: Value) -> Optional[Value]:
    """Make the `if` `branch` (in a pipelined body, after the dot that defines
    `pending`, which may still be in flight) read `pending` only after waiting for it:
    each region that reads it starts with `dot_wait {pending = 0}` and reads the
    waited value. The `if` also yields the accumulator — the waited value where it was
    waited for, `pending` itself elsewhere — and that result (returned; None when no
    region reads `pending`) is what the loop carries on: the waited registers are then
    the only copy live past the wait, instead of two accumulators through the branch."""
    readers = [r for r in branch.regions if any(pending in i.operands for i in r.walk())]
    if not readers:
        return None
    for region in branch.regions:
        out = pending
        if region in readers:
            waited = Instr(Op.DOT_WAIT, [pending], [Value(pending.type)], A.AsyncWaitAttrs(pending=0), [],
                           branch.loc)
            out = waited.results[0]
            for sub in region.walk():
                sub.operands = [out if v is pending else v for v in sub.operands]
            region.instrs.insert(0, waited)
        region.terminator.operands.append(out)
    result = Value(pending.type)
    result.owner = branch
    branch.results.append(result)
    return result
