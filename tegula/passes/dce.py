"""dce: dead code elimination.

Expects: verified IR. Guarantees: verified IR with the same stores, prints, asserts,
barriers and assumptions in the same order, from which these are gone:
- instructions without side effects (`ir_utils.has_side_effects`) none of whose
  results is used: pure ops, non-volatile loads, and whole `for` / `if` instructions
  whose regions contain no side effect (a `while` is kept: it might not terminate);
- the taken-branch-only form of an `if` with a constant condition (the dead region is
  dropped, the live one inlined);
- unused results of `if` (with their yielded operands) and unused loop-carried values
  of `for` whose body argument feeds nothing but its own `yield` slot.
A `hint` whose result is unused stays while its operand has other uses: it is a claim
about that operand (hints apply in place, see `axis_analysis`), as Triton's
`tl.multiple_of(x, v)` with the result discarded still informs the analysis of x.
An unused non-volatile load is removed like any pure op (as Triton does), so a kernel
whose only fault is an out-of-bounds load nobody reads no longer reports it.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from ..ir.accessors import FOR_INITS, for_inits
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import Op
from .ir_utils import constant_of, has_side_effects, resolve, taken_region, use_counts

# Each sweep removes whole dead chains (it walks blocks backwards); only pruning a
# loop-carried value can expose more work, so few sweeps are ever needed.
_MAX_SWEEPS = 16


def dce(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Remove dead code from `kernel` in place; returns it."""
    _inline_constant_ifs(kernel)
    for _ in range(_MAX_SWEEPS):
        sweep = _Sweep(use_counts(kernel.body), kernel.body)
        sweep.block(kernel.body)
        if not sweep.changed:
            break
    return kernel


def _inline_constant_ifs(kernel: Kernel) -> None:
    mapping: dict[Value, Value] = {}

    def visit(block: Block) -> None:
        out: list[Instr] = []
        pending = list(reversed(block.instrs))
        while pending:
            ins = pending.pop()
            ins.operands = [resolve(v, mapping) for v in ins.operands]
            cond = constant_of(ins.operands[0]) if ins.op is Op.IF else None
            if cond is not None:
                body, results = taken_region(ins, 0 if bool(cond) else 1)
                mapping.update(results)
                pending.extend(reversed(body))
                continue
            for region in ins.regions:
                visit(region)
            out.append(ins)
        block.instrs = out

    visit(kernel.body)


class _Sweep:
    def __init__(self, counts: Counter, root: Block) -> None:
        self.counts = counts
        # Uses by hints with unused results do not keep a hint alive (a used hint does:
        # its result's facts start from its operand's, in-place claims included). Taken
        # once per sweep; a hint that loses its users during the sweep counts as a use
        # until the next sweep, which only keeps more.
        self.unused_hints = {ins for ins in root.walk() if ins.op is Op.HINT and not counts[ins.results[0]]}
        self.hint_uses = Counter(ins.operands[0] for ins in self.unused_hints)
        self.changed = False

    def unused(self, values: list[Value]) -> bool:
        return all(self.counts[v] == 0 for v in values)

    def annotates_live(self, ins: Instr) -> bool:
        """A hint about a value that something other than unused hints still uses."""
        return ins.op is Op.HINT and self.counts[ins.operands[0]] > self.hint_uses[ins.operands[0]]

    def forget_uses(self, ins: Instr) -> None:
        for nested in ins.walk():
            for v in nested.operands:
                self.counts[v] -= 1
            if nested in self.unused_hints:
                self.hint_uses[nested.operands[0]] -= 1

    def block(self, block: Block) -> None:
        # backwards, so a use disappears before its definition is looked at
        kept: list[Instr] = []
        for ins in reversed(block.instrs):
            if self.unused(ins.results) and not has_side_effects(ins) and not self.annotates_live(ins):
                self.forget_uses(ins)
                self.changed = True
                continue
            if ins.op is Op.IF:
                self.prune_if(ins)
            elif ins.op is Op.FOR:
                self.prune_for(ins)
            for region in reversed(ins.regions):
                self.block(region)
            kept.append(ins)
        kept.reverse()
        block.instrs = kept

    def prune_if(self, ins: Instr) -> None:
        for i in reversed(range(len(ins.results))):
            if self.counts[ins.results[i]]:
                continue
            for region in ins.regions:
                term = region.terminator
                self.counts[term.operands[i]] -= 1
                del term.operands[i]
            del ins.results[i]
            self.changed = True

    def prune_for(self, loop: Instr) -> None:
        """Drop loop-carried values that only feed themselves: slot j is live when its
        result is used, or its body argument is needed by something live in the body;
        a dead slot's remaining users are themselves dead and go in the body's sweep."""
        body = loop.regions[0]
        term = body.terminator
        live_slots = {j for j, r in enumerate(loop.results) if self.counts[r]}
        while True:
            needed = _needed_in_body(body, [term.operands[j] for j in live_slots])
            grown = {j for j in range(len(loop.results)) if body.args[1 + j] in needed}
            if grown <= live_slots:
                break
            live_slots |= grown
        for i in reversed(range(len(loop.results))):
            if i in live_slots:
                continue
            self.counts[for_inits(loop)[i]] -= 1
            self.counts[term.operands[i]] -= 1
            del loop.results[i], loop.operands[FOR_INITS + i], body.args[1 + i], term.operands[i]
            self.changed = True


def _needed_in_body(body: Block, live_yields: list[Value]) -> set[Value]:
    """Values the body needs in order to compute `live_yields` and its side effects."""
    needed: set[Value] = set(live_yields)
    for ins in reversed(body.instrs[:-1]):
        if has_side_effects(ins) or any(r in needed for r in ins.results):
            for nested in ins.walk():
                needed.update(nested.operands)
    return needed
