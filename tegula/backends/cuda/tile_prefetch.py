"""A persistent kernel's staged operands copied one tile ahead (those its inner loops
read), or under its loops (those the tile reads after them).

In the body of a loop over output tiles (a persistent kernel's `for tile in
tl.range(pid, tiles, nprog)`), `stage_operands` stages a tile's dot operand (attention's
Q block) with a copy at the top of the body, waited for before the tile's inner loop:
every tile then starts on that copy's latency, a few hundred nanoseconds of a 30-60 us
tile, with nothing to run under it. When the copy's address is a pure function of the
tile index (and values defined before the tile loop), the next tile's copy can be issued
as soon as this tile has read the buffer for the last time:

    buf = local_alloc                        (before the tile loop, freed after it)
    async_copy buf, <address of tile lb>, mask & (lb in range)
    async_commit
    for tile in lb .. ub step s {
        async_wait 0 ; x = local_load buf    (before the first reader, as staged)
        ... the readers (the inner loop) ...
        (the copies staged after them, if any: the tail's B operand)
        async_copy buf, <address of tile + s>, mask & (tile + s in range)
        async_commit
        ... the rest of the tile (epilogue) runs under the copy ...
    }
    async_wait 0 ; local_dealloc buf

The copy for a tile past the last is masked off entirely (zero-filled, no global
access); the wait after the loop lets it land before the buffer is freed. The next
copy waits, behind a CTA barrier, for every warp to be done with the buffer (also for a
dot its reader left in flight: after that dot's wait). The buffer is then live across
the whole tile loop rather than only across its readers, so other buffers can no longer
reuse its bytes: `compile_kernel` compiles again without it (`TgirOptions.prefetch_tiles`) where shared memory would not
fit, before it gives up pipeline stages.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ...ir import attrs as A
from ...ir.builder import Builder
from ...ir.clone import clone_instr
from ...ir.core import Block, Instr, Value
from ...ir.ops import MEMORY_WRITES, OP_INFO, Op
from ...ir.types import I1, I32, TileType

# ops that read global memory (not cloned for the next tile: see `_address_slice`)
_READS = (Op.LOAD, Op.BLOCK_LOAD, Op.DESCRIPTOR_LOAD)


@dataclass
class StagedCopy:
    """The ops `stage_operands._stage` made for one staged load."""

    alloc: Instr
    copy: Instr
    commit: Instr
    wait: Instr
    value: Value          # the local_load the readers read
    dealloc: Instr


def prefetch_next_tile(parent: Block, loop: Instr, staged: StagedCopy) -> bool:
    """Rewrite `staged` (in the body of the tile loop `loop`, an op of `parent`) to copy
    one tile ahead (in place); the caller then counts the groups its wait leaves in
    flight (those the body commits before it). Returns False, changing nothing, where
    it does not apply: address code that depends on other loop-carried values, has
    effects or loads from memory, or a buffer whose ops are not all the body's."""
    body = loop.regions[0]
    iv = body.args[0]
    slice_ = _address_slice(body, staged.copy, iv, reads_memory=False)
    if slice_ is None or any(ins not in body.instrs for ins in (staged.alloc, staged.copy, staged.commit,
                                                                staged.dealloc)):
        return False
    if not any(_reads(ins, staged.value) for ins in body.instrs):
        return False
    lb, ub, step = loop.operands[:3]
    at_loop = parent.instrs.index(loop)
    loc = staged.copy.loc

    # before the loop: the buffer and the first tile's copy
    body.instrs.remove(staged.alloc)
    parent.instrs.insert(at_loop, staged.alloc)
    b = Builder()
    b.loc = loc
    b.set_insertion_before(parent, at_loop + 1)
    _emit_copy(b, staged, slice_, iv, lb, ub, step)

    # in the body: no copy at the top; the next tile's after the last reader (and after
    # the copies staged right behind it, so their waits need not wait for this one)
    for ins in (staged.copy, staged.commit, staged.dealloc):
        body.instrs.remove(ins)
    last = max(i for i, ins in enumerate(body.instrs) if _reads(ins, staged.value))
    # a dot the reader left in flight (a loop's accumulator, waited for where it is
    # first used) may still read the buffer: the copy comes after its wait
    in_flight = set(body.instrs[last].results)
    at = 1 + max([last] + [i for i, ins in enumerate(body.instrs)
                           if ins.op is Op.DOT_WAIT and in_flight & set(ins.operands)])
    while at < len(body.instrs) - 1 and body.instrs[at].op is not Op.ASYNC_WAIT:
        at += 1
    b.set_insertion_before(body, at)
    # every warp done reading the buffer before any overwrites it (insert_barriers sees
    # the readers at the local_load, before the loop's own barriers: it places none)
    b.create(Op.BARRIER, [], result_types=[])
    nxt = b.op1(Op.ADD, iv, step)
    _emit_copy(b, staged, slice_, iv, nxt, ub, step)

    # after the loop: the last (masked-off) copy lands before the buffer goes
    after = parent.instrs.index(loop) + 1
    b.set_insertion_before(parent, after)
    b.create(Op.ASYNC_WAIT, [], A.AsyncWaitAttrs(pending=0))
    b.insert(staged.dealloc)
    return True


def _reads(ins: Instr, value: Value) -> bool:
    return any(value in sub.operands for sub in ins.walk())


def _address_slice(body: Block, copy: Instr, iv: Value, reads_memory: bool = True) -> Optional[list[Instr]]:
    """The body's ops that the copy's pointers and mask are computed from (body order),
    when all are pure (an `if` of pure ops included) and read nothing of the body's
    block arguments but the induction variable; else None. Without `reads_memory`, a
    load among them refuses too: cloned for the next tile, it would read where that
    tile's address code points even past the last tile (the copy itself is masked)."""
    carried = set(body.args[1:])
    defined = {r: ins for ins in body.instrs for r in ins.results}
    needed: set[Instr] = set()
    todo = list(copy.operands[2:])
    while todo:
        v = todo.pop()
        if v in carried:
            return None
        ins = defined.get(v)
        if ins is None or ins in needed:
            continue
        if not _pure(ins) or (not reads_memory and any(sub.op in _READS for sub in ins.walk())):
            return None
        needed.add(ins)
        inner = {r for sub in ins.walk() for r in sub.results} | {a for region in ins.regions for a in region.args}
        todo.extend(v for sub in ins.walk() for v in sub.operands if v not in inner)
    return [ins for ins in body.instrs if ins in needed]


def _pure(ins: Instr) -> bool:
    """A pure op, or an `if` of such, nested ifs included (a tile coordinate chosen by
    conditions: the causal forward's Q-block order)."""
    if ins.op is Op.IF:
        return all(sub.op is Op.YIELD or _pure(sub) for region in ins.regions for sub in region.instrs)
    return OP_INFO[ins.op].pure and not ins.regions


def _emit_copy(b: Builder, staged: StagedCopy, slice_: list[Instr], iv: Value, tile: Value, ub: Value,
               step: Value) -> None:
    """The staged copy for tile `tile` (its address code cloned with iv := tile), masked
    off where `tile` is past the loop's end (either way of stepping)."""
    mapping: dict[Value, Value] = {iv: tile}
    for ins in slice_:
        b.insert(clone_instr(ins, mapping))
    zero = b.constant(0, I32)
    forward = b.op1(Op.GT, step, zero)
    inside = b.op1(Op.SELECT, forward, b.op1(Op.LT, tile, ub), b.op1(Op.GT, tile, ub))
    buf, _slot, ptrs, *rest = staged.copy.operands
    ptrs = mapping.get(ptrs, ptrs)
    slot = b.constant(0, I32)  # (the body's own constant is defined after this point)
    shape = ptrs.type.shape
    keep = b.splat(inside, shape)
    if staged.copy.attrs.has_mask:
        mask = mapping.get(rest[0], rest[0])
        keep = b.op1(Op.AND, mask, keep, type=TileType(shape, I1))
        extra = [mapping.get(v, v) for v in rest[1:]]
    else:
        extra = []
    b.create(Op.ASYNC_COPY, [buf, slot, ptrs, keep, *extra], replace(staged.copy.attrs, has_mask=True),
             result_types=[])
    b.create(Op.ASYNC_COMMIT, [], result_types=[])


# what a staged copy moving up its tile's body may not pass: copy groups (their waits
# count the groups committed after them), memory writes (the copy might read what they
# write), CTA barriers (a user's `debug_barrier` orders memory) and asm with effects;
# mbarrier waits and arrivals (a specialized loop's hand-over of its ring slots) do not
# concern a copy into a buffer of its own
_BLOCKING = MEMORY_WRITES | {Op.ASYNC_COPY, Op.ASYNC_COMMIT, Op.ASYNC_WAIT, Op.BARRIER, Op.DEBUG_BARRIER}


def _blocks_hoist(ins: Instr) -> bool:
    return any(sub.op in _BLOCKING or (sub.op is Op.INLINE_ASM and not sub.attrs.is_pure)
               for sub in ins.walk())


def hoist_tile_copy(body: Block, staged: StagedCopy) -> bool:
    """Move the staged copy of an operand read in the tile body itself (the rotated
    attention loop's last V block, read after the KV loop) up the body, with the pure
    address code it needs, past the ops that neither define what it reads nor hold one
    of `_BLOCKING` or asm with effects (a warp-specialized KV loop's consumers wait
    on mbarriers, not on copy groups): the copy then lands under the tile's loops
    instead of after them. Its buffer stays per tile (freed after its reader, where the
    output's staging may take its bytes) but now lives across the loops (shared memory
    that `compile_kernel` gives back, with the tile-ahead copies, where it would not
    fit). Returns whether it moved."""
    ops = body.instrs
    start, end = ops.index(staged.alloc), ops.index(staged.commit)
    group = ops[start:end + 1]  # alloc, slot, copy, commit: as `_stage` laid them out
    inside = {r for ins in group for r in ins.results}
    slice_ = _address_slice(body, staged.copy, body.args[0])
    if slice_ is None or any(ins in group for ins in slice_):
        return False
    moving = slice_ + group
    moved = set(moving)
    needed = {v for ins in moving for v in ins.operands} - inside - {r for ins in slice_ for r in ins.results}
    at = start
    while at > 0:
        prev = ops[at - 1]
        if prev in moved:
            at -= 1
            continue
        if needed & set(prev.results) or _blocks_hoist(prev):
            break
        at -= 1
    if not any(ins not in moved for ins in ops[at:start]):
        return False
    # (address code above the new place stays where it is)
    body.instrs = ops[:at] + [ins for ins in ops[at:] if ins in moved] + [ins for ins in ops[at:] if ins not in moved]
    return True
