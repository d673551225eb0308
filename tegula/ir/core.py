"""The IR's data structures: source locations, values, instructions, blocks, kernels.

- `Value`: an SSA value with a type; defined by an instruction result or a block
  argument. Identity is object identity; names are only for printing.
- `Instr`: one operation: `op`, `operands`, `results`, typed `attrs` (the class the op
  table names), nested `regions` (structured control flow, combine functions) and the
  source `loc` it came from.
- `Block`: arguments and a list of instructions; the last instruction of a region's
  block is a terminator (`yield`, `condition`, `return`).
- `Kernel`: the unit the compiler works on: name, typed arguments with specialization
  attributes, and the body block.

Region conventions (the verifier checks them):
- `for lb, ub, step, *inits` — body block args `(iv, *iters)`, ends in `yield *iters`;
  results are the final iters.
- `if cond` — two regions (then, else), each ending in `yield *results`.
- `while *inits` — region 0 ("before", args = inits' types) ends in
  `condition cond, *vals`; region 1 ("after", args = vals' types) ends in `yield *inits'`;
  results have the types of `vals`.
- `reduce *xs` / `scan *xs` — region args are 2·n scalars (accumulated then new), ends in
  `yield` of n scalars.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from .ops import Op
from .types import Type


@dataclass(frozen=True)
class Loc:
    """A source location: absolute file path, 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0
    end_col: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


UNKNOWN_LOC = Loc("<unknown>", 0, 0)

_value_ids = itertools.count()


class Value:
    """An SSA value. `owner` is the defining `Instr` or `Block` (for block arguments)."""

    __slots__ = ("type", "name", "owner", "id")

    def __init__(self, type: Type, name: str = "", owner: Any = None):
        self.type = type
        self.name = name
        self.owner = owner
        self.id = next(_value_ids)

    def __repr__(self) -> str:
        label = self.name or f"v{self.id}"
        return f"<Value %{label}: {self.type}>"


@dataclass(eq=False)
class Instr:
    op: Op
    operands: list[Value]
    results: list[Value]
    attrs: Any = None
    regions: list["Block"] = field(default_factory=list)
    loc: Loc = UNKNOWN_LOC
    # tgir: the shared-memory bytes this op owns, (offset, size): a buffer's placement
    # (`local_alloc`) or an op's scratch; set by the CUDA backend's allocation pass
    smem: Optional[tuple[int, int]] = None

    def __post_init__(self):
        for r in self.results:
            r.owner = self

    @property
    def result(self) -> Value:
        """The single result of a one-result instruction."""
        if len(self.results) != 1:
            raise ValueError(f"{self.op.value} has {len(self.results)} results, not one")
        return self.results[0]

    def walk(self) -> Iterator["Instr"]:
        """This instruction and every instruction nested in its regions, pre-order."""
        yield self
        for region in self.regions:
            yield from region.walk()

    def __repr__(self) -> str:
        return f"<Instr {self.op.value} at {self.loc}>"


@dataclass(eq=False)
class Block:
    args: list[Value] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)

    def __post_init__(self):
        for a in self.args:
            a.owner = self

    def add_arg(self, type: Type, name: str = "") -> Value:
        v = Value(type, name, self)
        self.args.append(v)
        return v

    @property
    def terminator(self) -> Optional[Instr]:
        return self.instrs[-1] if self.instrs else None

    def walk(self) -> Iterator[Instr]:
        for ins in self.instrs:
            yield from ins.walk()

    def blocks(self) -> Iterator["Block"]:
        """This block and every block nested in its instructions' regions, pre-order."""
        yield self
        for ins in self.instrs:
            for region in ins.regions:
                yield from region.blocks()


@dataclass
class ArgAttrs:
    """What the specialization knows of a kernel argument.

    `divisibility`: the largest power of two (up to 16) known to divide an integer value
    or a pointer's byte address; 1 when nothing is known. Arguments equal to 1 or
    declared constexpr never become kernel arguments: the frontend folds them.

    `exact_divisibility`: an integer's `divisibility` is its own largest power-of-two
    divisor (up to 16), measured by the launch the kernel is compiled for (the JIT's
    specialization), not only what a caller promised (Triton's `tt.divisibility`
    attributes of an `ASTSource`, a `do_not_specialize` parameter). Only where it is a
    promise may the alignment be better at run time (`alignment_versions`)."""

    divisibility: int = 1
    exact_divisibility: bool = False


@dataclass(eq=False)
class Kernel:
    name: str
    body: Block
    arg_names: list[str] = field(default_factory=list)
    arg_attrs: list[ArgAttrs] = field(default_factory=list)
    loc: Loc = UNKNOWN_LOC

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self) -> Iterator[Instr]:
        return self.body.walk()
