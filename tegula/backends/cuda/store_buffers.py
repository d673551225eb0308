"""A loop's TMA stores through buffers of their own, waited for an iteration later.

A `descriptor_store` kept for TMA (`tma.tma_stores`) writes its block into the op's
scratch and has thread 0 issue the bulk tensor copies. Scratch is every later op's too,
so the lowering waits right there until the copy engine has read the bytes
(`cp.async.bulk.wait_group.read 0`), and the next CTA barrier makes every thread wait
with thread 0. In the persistent attention forward on the H200 that wait put thread 0's
warpgroup 0.67 us behind the other at the end of every tile (a 128x128 fp16 block;
per-tile trace, docs/performance.md session 21).

In the body of a `for` loop (a persistent kernel's tile loop, a flattened loop's
epilogue under its `if`), each such store gets a buffer allocated before the loop and
freed after it, which nothing else uses in between, and becomes a `tma_store`:

    buf = local_alloc smem<1 x block>
    for ... {
        ...
        tma_store buf, desc, offsets..., value    (thread 0 first waits until the copy
                                                   engine has read the previous block
                                                   out of buf; then as descriptor_store)
        ...
    }
    bulk_wait {pending = 0}
    local_dealloc buf

The wait is then an iteration after the copy it waits for, which has long been read.
Stores outside loops, and in `while` loops, keep the scratch and the wait at the store
(a kernel ends on its stores; nothing runs under a wait there).

The buffer's bytes are taken for the whole loop, so other buffers and scratch can no
longer reuse them: `compile_kernel` compiles again without these buffers
(`TgirOptions.buffer_stores`) where shared memory would not fit, before it gives up
tile-ahead copies or pipeline stages.
"""
from __future__ import annotations

from typing import Iterator

from ...ir import attrs as A
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import SmemType, TensorDescType


def buffer_loop_stores(kernel: Kernel) -> int:
    """Give each TMA-kept descriptor store in a `for` loop's body a buffer of its own
    (in place); returns how many."""
    done = 0
    for block, loop in list(_loops(kernel.body)):
        for holder, store in list(_stores_of(loop.regions[0])):
            _buffer(block, loop, holder, store)
            done += 1
    return done


def _loops(block: Block) -> Iterator[tuple[Block, Instr]]:
    """Every `for` under `block`, with the block holding it (outer loops first)."""
    for ins in block.instrs:
        if ins.op is Op.FOR:
            yield block, ins
        for region in ins.regions:
            yield from _loops(region)


def _stores_of(body: Block) -> Iterator[tuple[Block, Instr]]:
    """The descriptor stores whose innermost enclosing loop has `body` as its body (in
    `if` regions too, not in nested loops), with the block holding each."""
    for ins in body.instrs:
        if ins.op is Op.DESCRIPTOR_STORE:
            yield body, ins
        elif ins.op is Op.IF:
            for region in ins.regions:
                yield from _stores_of(region)


def _buffer(block: Block, loop: Instr, holder: Block, store: Instr) -> None:
    desc: TensorDescType = store.operands[0].type
    buf = Value(SmemType((1, *desc.block), desc.element))
    at = block.instrs.index(loop)
    block.instrs.insert(at, Instr(Op.LOCAL_ALLOC, [], [buf], loc=store.loc))
    holder.instrs[holder.instrs.index(store)] = Instr(Op.TMA_STORE, [buf, *store.operands], [], loc=store.loc)
    after = block.instrs.index(loop) + 1
    block.instrs[after:after] = [Instr(Op.BULK_WAIT, [], [], attrs=A.AsyncWaitAttrs(pending=0), loc=store.loc),
                                 Instr(Op.LOCAL_DEALLOC, [buf], [], loc=store.loc)]
