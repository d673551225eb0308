"""`block_pointers_to_pointers`: block-pointer values and accesses rewritten as pointer
code — the lowering of `make_block_ptr`, `advance`, `block_load` and `block_store` on
every compiled backend (Triton's `RewriteTensorPointer`, which Triton 3.6 also runs
before any NVIDIA-specific pass).

Expects: verified IR. A `blockptr` value may be a loop's iter arg or result, a
`while`'s region argument, an `if`'s result. Guarantees: no block-pointer op and no
`blockptr` value is left. Each block pointer becomes its parts, in this order: base,
shape... (i64), strides... (i64), offsets... (i32); a `for` / `while` / `if` carrying
one carries its parts instead (an iter arg becomes 1 + 3n iter args, a yield yields
the parts), `advance` becomes i32 adds of the offsets, and an access becomes the code
the frontend emitted for it before block pointers were ops (`block_addresses`, with
the `boundary_check` dims checked), so the rest of the compiler sees what it always saw:

    load ptrs[, inside, padding]   |   store ptrs, value[, inside]

(i1 elements go through i8 memory, as `tl.load`/`tl.store` do). The pass does not
clean up after itself: run `canonicalize`, `cse`, `licm`, `dce` next
(`lower_block_pointers` does). Carried parts that never change (base, shape, strides
yielded as they came) are then dropped from `for` loops, and the address code is
hoisted, as when the frontend emitted it; the straight-line code is text-identical to
the frontend's old output.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

from ..ir import attrs as A
from ..ir.builder import Builder
from ..ir.clone import clone_kernel
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import BLOCK_POINTER_OPS, Op
from ..ir.types import I1, I8, I32, I64, BlockPtrType, PointerType, TileType, Type
from .block_addresses import block_addresses
from .ir_utils import resolve


class Parts(NamedTuple):
    """A block pointer's run-time parts."""

    base: Value
    shape: tuple[Value, ...]
    strides: tuple[Value, ...]
    offsets: tuple[Value, ...]

    def flat(self) -> list[Value]:
        return [self.base, *self.shape, *self.strides, *self.offsets]


def part_types(t: BlockPtrType) -> list[Type]:
    """The types of a block pointer's parts, in `Parts.flat` order."""
    return [t.pointer] + [I64] * (2 * t.rank) + [I32] * t.rank


def _parts(t: BlockPtrType, values: list[Value]) -> Parts:
    n = t.rank
    return Parts(values[0], tuple(values[1:1 + n]), tuple(values[1 + n:1 + 2 * n]), tuple(values[1 + 2 * n:]))


def has_block_pointers(kernel: Kernel) -> bool:
    return any(ins.op in BLOCK_POINTER_OPS for ins in kernel.walk())


def block_pointers_to_pointers(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Rewrite every block pointer of `kernel` (in place) into its parts and pointer code."""
    _Rewriter().block(kernel.body)
    return kernel


def lower_block_pointers(kernel: Kernel, ctx: Any = None, copy: bool = True) -> Kernel:
    """`kernel` with its block pointers rewritten and the result cleaned up: a copy
    (`kernel` itself when `copy` is False, or when it has no block-pointer ops)."""
    if not has_block_pointers(kernel):
        return kernel
    from .descriptors_to_pointers import CLEANUP
    from .manager import PassContext, run_pipeline

    return run_pipeline(clone_kernel(kernel) if copy else kernel, [block_pointers_to_pointers, *CLEANUP],
                        ctx or PassContext())


# ops whose operands (all of them) may be block pointers, each passed on as its parts
_CARRIERS = (Op.FOR, Op.WHILE, Op.YIELD, Op.CONDITION)


class _Rewriter:
    def __init__(self) -> None:
        self.parts: dict[Value, Parts] = {}
        self.replaced: dict[Value, Value] = {}

    def expand(self, values: list[Value]) -> list[Value]:
        out: list[Value] = []
        for v in values:
            out.extend(self.parts[v].flat() if isinstance(v.type, BlockPtrType) else [v])
        return out

    def split_args(self, block: Block, start: int = 0) -> None:
        """Replace `block`'s blockptr arguments (from index `start`) by their parts."""
        args = block.args[:start]
        for a in block.args[start:]:
            if isinstance(a.type, BlockPtrType):
                new = [Value(t, owner=block) for t in part_types(a.type)]
                self.parts[a] = _parts(a.type, new)
                args.extend(new)
            else:
                args.append(a)
        block.args = args

    def split_results(self, ins: Instr) -> None:
        results = []
        for r in ins.results:
            if isinstance(r.type, BlockPtrType):
                new = [Value(t, owner=ins) for t in part_types(r.type)]
                self.parts[r] = _parts(r.type, new)
                results.extend(new)
            else:
                results.append(r)
        ins.results = results

    def block(self, block: Block) -> None:
        out: list[Instr] = []
        for ins in block.instrs:
            ins.operands = [resolve(v, self.replaced) for v in ins.operands]
            if ins.op in _CARRIERS:
                ins.operands = self.expand(ins.operands)
            if ins.op is Op.FOR:
                self.split_args(ins.regions[0], start=1)
            elif ins.op is Op.WHILE:
                self.split_args(ins.regions[0])
                self.split_args(ins.regions[1])
            for region in ins.regions:
                self.block(region)
            if ins.op in (Op.FOR, Op.WHILE, Op.IF):
                self.split_results(ins)
            if ins.op in BLOCK_POINTER_OPS:
                b = Builder(Block())
                b.loc = ins.loc
                self.rewrite(b, ins)
                out.extend(b.block.instrs)
                continue
            out.append(ins)
        block.instrs = out

    def rewrite(self, b: Builder, ins: Instr) -> None:
        if ins.op is Op.MAKE_BLOCK_PTR:
            self.parts[ins.result] = _parts(ins.result.type, list(ins.operands))
            return
        bp: BlockPtrType = ins.operands[0].type
        p = self.parts[ins.operands[0]]
        if ins.op is Op.ADVANCE:
            moved = tuple(b.op1(Op.ADD, off, d) for off, d in zip(p.offsets, ins.operands[1:]))
            self.parts[ins.result] = p._replace(offsets=moved)
            return
        ptrs, inside = block_addresses(b, bp.block, p.base, p.shape, p.strides, p.offsets, ins.attrs.boundary_check)
        elem = bp.element
        if elem == I1:  # bools live in bytes
            ptrs = b.op1(Op.BITCAST, ptrs, type=TileType(bp.block, PointerType(I8)))
        mem = TileType(bp.block, I8 if elem == I1 else elem)
        if ins.op is Op.BLOCK_LOAD:
            self.replaced[ins.result] = _load(b, ins.attrs, ptrs, inside, mem, elem)
            return
        value = ins.operands[1]
        if elem == I1:
            value = b.cast(value, I8)
        a = ins.attrs
        b.create(Op.STORE, [ptrs, value] + ([inside] if inside is not None else []),
                 A.StoreAttrs(inside is not None, a.cache_modifier, a.eviction_policy), result_types=[])


def _load(b: Builder, a: A.BlockLoadAttrs, ptrs: Value, inside: Optional[Value], mem: TileType,
          elem: Any) -> Value:
    """The load of a block (its padding where `inside` is false), as `elem`s."""
    extra = []
    if inside is not None:
        fill = math.nan if a.padding == "nan" else (0.0 if mem.element.is_float else 0)
        extra = [inside, b.splat(b.constant(fill, mem.element), mem.shape)]
    attrs = A.LoadAttrs(inside is not None, inside is not None, a.cache_modifier, a.eviction_policy, a.volatile)
    v = b.op1(Op.LOAD, ptrs, *extra, attrs=attrs, type=mem)
    return b.op1(Op.NE, v, b.constant(0, mem)) if elem == I1 else v
