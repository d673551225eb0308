"""`Builder`: creates instructions at an insertion point, inferring result types from
the op table and stamping each with the current source location.

The frontend's `semantic` layer is handed a Builder; passes use one to create
replacement instructions. Typing *rules* (promotion, broadcasting) live in
`tegula.language.semantic`; the builder only applies the op table's result rule.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

from . import attrs as A
from .core import UNKNOWN_LOC, Block, Instr, Kernel, Loc, Value
from .ops import OP_INFO, Op
from .types import TileType, Type, element_of, shape_of, with_shape


class Builder:
    def __init__(self, block: Optional[Block] = None):
        self.block = block
        self.index: Optional[int] = None  # None = append at the end of `block`
        self.loc: Loc = UNKNOWN_LOC

    # ---------------------------------------------------------------- insertion point
    def set_insertion_end(self, block: Block) -> None:
        self.block, self.index = block, None

    def set_insertion_before(self, block: Block, index: int) -> None:
        self.block, self.index = block, index

    @contextmanager
    def at_end_of(self, block: Block) -> Iterator["Builder"]:
        saved = (self.block, self.index)
        self.block, self.index = block, None
        try:
            yield self
        finally:
            self.block, self.index = saved

    @contextmanager
    def location(self, loc: Loc) -> Iterator[None]:
        saved = self.loc
        self.loc = loc
        try:
            yield
        finally:
            self.loc = saved

    def insert(self, ins: Instr) -> Instr:
        if self.block is None:
            raise RuntimeError("Builder has no insertion block")
        if self.index is None:
            self.block.instrs.append(ins)
        else:
            self.block.instrs.insert(self.index, ins)
            self.index += 1
        return ins

    # ---------------------------------------------------------------- generic creation
    def create(self, op: Op, operands: Sequence[Value], attrs: Any = None,
               result_types: Optional[Sequence[Type]] = None,
               regions: Sequence[Block] = ()) -> Instr:
        """Create and insert an instruction. Result types come from the op table's rule
        unless given (they must be given for ops whose rule cannot decide)."""
        if result_types is None:
            rule = OP_INFO[op].result
            inferred = rule([v.type for v in operands], attrs) if rule else None
            if inferred is None:
                raise TypeError(f"result type of '{op.value}' must be given explicitly")
            result_types = inferred
        results = [Value(t) for t in result_types]
        ins = Instr(op, list(operands), results, attrs, list(regions), self.loc)
        return self.insert(ins)

    def op1(self, op: Op, *operands: Value, attrs: Any = None,
            type: Optional[Type] = None) -> Value:
        """Create a one-result instruction and return its result."""
        return self.create(op, operands, attrs, None if type is None else [type]).result

    # ---------------------------------------------------------------- conveniences
    def constant(self, value: Any, type: Type) -> Value:
        return self.op1(Op.CONSTANT, attrs=A.ConstantAttrs(value), type=type)

    def splat(self, v: Value, shape: Sequence[int]) -> Value:
        return self.op1(Op.SPLAT, v, type=TileType(tuple(shape), element_of(v.type)))

    def broadcast(self, v: Value, shape: Sequence[int]) -> Value:
        return self.op1(Op.BROADCAST, v, attrs=A.ShapeAttrs(tuple(shape)))

    def cast(self, v: Value, to_element: Type, rounding: str = "rtne") -> Value:
        return self.op1(Op.CAST, v, attrs=A.CastAttrs(rounding),
                        type=with_shape(to_element, shape_of(v.type)))

    def yield_(self, values: Sequence[Value]) -> Instr:
        return self.create(Op.YIELD, values, result_types=[])


def new_kernel(name: str, arg_types: Sequence[Type], arg_names: Sequence[str],
               loc: Loc = UNKNOWN_LOC) -> Kernel:
    """An empty kernel whose body block has one argument per kernel argument."""
    body = Block()
    for t, n in zip(arg_types, arg_names):
        body.add_arg(t, n)
    return Kernel(name, body, list(arg_names), [], loc)
