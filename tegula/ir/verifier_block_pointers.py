"""The verifier's rules for block pointers (`blockptr` values and the ops
`make_block_ptr`, `advance`, `block_load`, `block_store`), as functions returning the
problem's message (None when the IR is fine), which `verifier` reports at the
instruction.

A `blockptr` value may cross region boundaries — `for` / `while` carry it and `if`s
yield it, as Triton's block pointers are advanced in loops — but is never a kernel
argument, and only the block-pointer ops, the control-flow ops and terminators take one
as an operand: the pass `block_pointers_to_pointers` must find each one's parts.
"""
from __future__ import annotations

from typing import Optional

from .core import Instr
from .ops import Op
from .types import I32, I64, BlockPtrType, ScalarType, Type, without_encoding

# ops that may take a blockptr operand
USERS = frozenset({Op.ADVANCE, Op.BLOCK_LOAD, Op.BLOCK_STORE, Op.FOR, Op.WHILE, Op.YIELD, Op.CONDITION})


def type_problem(t: BlockPtrType) -> Optional[str]:
    """What is wrong with a blockptr type, if anything."""
    if not t.block or not all(d > 0 and d & (d - 1) == 0 for d in t.block):
        return "a block pointer's block has power-of-two dimensions"
    if sorted(t.order) != list(range(t.rank)):
        return f"a block pointer's order is a permutation of 0..{t.rank - 1}"
    if not isinstance(t.element, ScalarType):
        return "a block pointer's element is a scalar type"
    return None


def _types(ts: list) -> str:
    return "(" + ", ".join(str(t) for t in ts) + ")"


def op_problem(ins: Instr, ts: list[Type], rts: list[Type]) -> Optional[str]:
    """What is wrong with a block-pointer op's operands, results or attributes."""
    op = ins.op
    if op is Op.MAKE_BLOCK_PTR:
        bp = rts[0] if rts else None
        if not isinstance(bp, BlockPtrType):
            return f"'make_block_ptr' makes a blockptr, not a {bp}"
        n = bp.rank
        want = [bp.pointer] + [I64] * (2 * n) + [I32] * n
        if ts != want:
            return f"'make_block_ptr' of {bp} takes (base, shape..., strides..., offsets...) {_types(want)}, " \
                   f"got {_types(ts)}"
        return None
    bp = ts[0] if ts else None
    if not isinstance(bp, BlockPtrType):
        return f"'{op.value}' takes a block pointer first, got {bp}"
    if op is Op.ADVANCE:
        want = [bp] + [I32] * bp.rank
        return None if ts == want else f"'advance' of {bp} takes (block pointer, deltas...) {_types(want)}, " \
                                      f"got {_types(ts)}"
    if op is Op.BLOCK_STORE and without_encoding(ts[1]) != bp.block_type:
        return f"'block_store' through {bp} stores a {bp.block_type}, got {ts[1]}"
    dims = ins.attrs.boundary_check
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < bp.rank for d in dims):
        return f"'{op.value}' boundary_check {dims} must be distinct sorted dimensions of {bp}"
    if op is Op.BLOCK_LOAD:
        padding = ins.attrs.padding
        if padding not in ("zero", "nan") or (padding == "nan" and not getattr(bp.element, "is_float", False)):
            return f"'block_load' padding is 'zero', or 'nan' for float elements, got {padding!r} for {bp}"
    return None
