"""Named access to the operands of the ops whose operand lists have a layout: `for`,
`while`, and the memory ops (load, store, atomics, async_copy).

Passes and backends read `for_inits(loop)` or `memory_operands(ins).mask` instead of
re-deriving positions (`operands[3:]`, "the mask is operand 2 when has_mask") in many
files. Rewrites that delete loop-carried values still edit the lists; they use
`FOR_INITS` for the position of the first initial value.

- `for lower, upper, step, inits...` with one region `^(iv, iter_args...)` ending in
  `yield` of the next values;
- `while inits...` with regions `before ^(args...)` ending in `condition cond, values...`
  and `after ^(values...)` ending in `yield` of the next args;
- `load ptr[, mask][, other]`, `store ptr, value[, mask]`, `atomic_rmw ptr, value[, mask]`,
  `atomic_cas ptr, cmp, value`, `async_copy buf, slot, ptr[, mask]`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .core import Block, Instr, Value
from .ops import Op

FOR_INITS = 3  # position of a `for`'s first loop-carried initial value


def for_bounds(loop: Instr) -> tuple[Value, Value, Value]:
    """(lower, upper, step) of a `for`."""
    return loop.operands[0], loop.operands[1], loop.operands[2]


def for_inits(loop: Instr) -> list[Value]:
    """The initial values of a `for`'s loop-carried values."""
    return loop.operands[FOR_INITS:]


def for_body(loop: Instr) -> Block:
    return loop.regions[0]


def for_iv(loop: Instr) -> Value:
    """The induction variable (the body's first argument)."""
    return loop.regions[0].args[0]


def for_iter_args(loop: Instr) -> list[Value]:
    """The loop-carried values as the body sees them."""
    return loop.regions[0].args[1:]


def for_yields(loop: Instr) -> list[Value]:
    """The next iteration's loop-carried values (the body's `yield` operands)."""
    return loop.regions[0].terminator.operands


def while_regions(loop: Instr) -> tuple[Block, Block]:
    """(before, after) of a `while`."""
    return loop.regions[0], loop.regions[1]


def while_condition(loop: Instr) -> Instr:
    """The `condition cond, values...` ending a `while`'s before-region."""
    return loop.regions[0].terminator


@dataclass(frozen=True)
class MemoryOperands:
    """The operands of a memory op by role (None where the op has no such operand)."""

    pointer: Value
    value: Optional[Value] = None     # store, atomic_rmw, atomic_cas (the new value)
    mask: Optional[Value] = None
    other: Optional[Value] = None     # load
    compare: Optional[Value] = None   # atomic_cas
    buffer: Optional[Value] = None    # async_copy
    slot: Optional[Value] = None      # async_copy
    index: Optional[Value] = None     # async_copy with a bound: copied where index < bound
    bound: Optional[Value] = None


def memory_operands(ins: Instr) -> MemoryOperands:
    """`ins`'s operands by role; `ins` is a load, store, atomic or async_copy."""
    ops, a = ins.operands, ins.attrs
    if ins.op is Op.LOAD:
        rest = iter(ops[1:])
        mask = next(rest) if a.has_mask else None
        other = next(rest) if a.has_other else None
        return MemoryOperands(ops[0], mask=mask, other=other)
    if ins.op is Op.STORE:
        return MemoryOperands(ops[0], value=ops[1], mask=ops[2] if a.has_mask else None)
    if ins.op is Op.ATOMIC_RMW:
        return MemoryOperands(ops[0], value=ops[1], mask=ops[2] if a.has_mask else None)
    if ins.op is Op.ATOMIC_CAS:
        return MemoryOperands(ops[0], value=ops[2], compare=ops[1])
    if ins.op is Op.ASYNC_COPY:
        rest = iter(ops[3:])
        mask = next(rest) if a.has_mask else None
        index, bound = (next(rest), next(rest)) if a.has_bound else (None, None)
        return MemoryOperands(ops[2], mask=mask, buffer=ops[0], slot=ops[1], index=index, bound=bound)
    raise ValueError(f"'{ins.op.value}' is not a memory op")
