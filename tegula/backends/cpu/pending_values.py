"""Expensive elementwise results with several users, computed once where they are first
needed (the CPU lowering's mixin `PendingValues`).

Such a value (softmax's `exp`) is not stored when its instruction is lowered: it stays
pending (`CpuLowering.pending`, a `Lazy` marked `pending`). A reduction that reads it
first computes it inside its own loop and stores each element as it goes
(`store_through`), so the exp and the sum are one pass over the row; any other first
reader stores it beforehand (`_flush_pending`), where it dominates every later use.
"""
from __future__ import annotations

from typing import Optional

from ...ir.core import Instr, Value
from ...ir.ops import Op
from .tiles import Lazy, Tile


class PendingValues:
    def _flush_pending(self, ins: Instr) -> None:
        """Store the pending values `ins` reads (in its operands or nested regions) before
        it runs, so they are computed once, where they dominate every later use; a
        reduction reads its own operands as they are (it stores them in its loop)."""
        own = {id(o) for o in ins.operands} if ins.op is Op.REDUCE else ()
        used = {id(o) for x in ins.walk() for o in x.operands}
        for k in [k for k in self.pending if k in used and k not in own]:
            v = self.pending.pop(k)
            self.env[k] = self.tile(v)

    def store_through(self, v: Value) -> Optional[Tile]:
        """For a pending `v` read once per element by the loop about to be emitted: make
        each read also store the element into `v`'s buffer, which is returned (bind it
        to `v` after the loop); None when `v` is not pending."""
        if id(v) not in self.pending:
            return None
        del self.pending[id(v)]
        x = self.env[id(v)]
        t = self.new_tile(v.type)

        def fn(i):
            out = x.fn(i)
            self.b.store(out, self.elem_ptr(t, i))
            return out
        self.env[id(v)] = Lazy(fn, v.type, cheap=False)
        return t
