"""Small IR queries and rewrites shared by the passes.

The IR keeps no use lists (values are plain objects, `Instr.operands` point at them), so
passes that need uses count them here, and replacements go into a mapping that a pass
applies (`resolve`) to operands as it walks the IR in textual order, where every
definition comes before its uses. Regions may use values of enclosing blocks, so
"defined inside an instruction" means every result and block argument nested in its
regions.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Optional

from ..ir.accessors import for_inits, for_yields, while_condition
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import OP_INFO, Kind, Op
from ..ir.types import is_pointer
from .const_fold import canonical_literal

# Ops with effects the table's `pure` flag does not capture by itself: a `while` may not
# terminate, so removing an unused one could change behaviour.
_NEVER_REMOVABLE = frozenset({Op.WHILE, Op.RETURN})


def constant_of(v: Value) -> Optional[Any]:
    """The literal of a value defined by `constant` (uniform over a tile), else None."""
    owner = v.owner
    if isinstance(owner, Instr) and owner.op is Op.CONSTANT:
        return owner.attrs.value
    return None


def constant_bounds(loop: Instr) -> tuple[Optional[int], Optional[int], Optional[int]]:
    """A `for`'s lower bound, upper bound and step, each as its type wraps it where it
    is a constant, else None."""
    t = loop.operands[0].type
    return tuple(None if (lit := constant_of(v)) is None else canonical_literal(lit, t)  # type: ignore[return-value]
                 for v in loop.operands[:3])


def static_trip_count(loop: Instr) -> Optional[int]:
    """How many iterations a `for` runs when its bounds and step are constants (a loop
    over `tl.cdiv(V, BV)` blocks with both constexpr), else None."""
    lb, ub, step = constant_bounds(loop)
    if lb is None or ub is None or not step:
        return None
    return max(0, -((lb - ub) // step))  # ceil((ub - lb) / step), either sign of step


def uniform_constant_of(v: Value) -> Optional[Any]:
    """The literal of a value that is a constant, or a splat of one, or either moved to
    another layout (a layout change of a uniform tile is the same tile: the GPU stage's
    constant initialiser converted into a dot's accumulator layout); else None."""
    while isinstance(v.owner, Instr) and v.owner.op is Op.CONVERT_LAYOUT:
        v = v.owner.operands[0]
    c = constant_of(v)
    if c is None and isinstance(v.owner, Instr) and v.owner.op is Op.SPLAT:
        c = constant_of(v.owner.operands[0])
    return c


def users_of(root: Block) -> dict[Value, list[Instr]]:
    """The instructions reading each value (once per operand slot), over `root` and all
    nested regions."""
    users: dict[Value, list[Instr]] = {}
    for ins in root.walk():
        for v in ins.operands:
            users.setdefault(v, []).append(ins)
    return users


def use_counts(root: Block) -> Counter:
    """How many operand slots refer to each value, over `root` and all nested regions."""
    counts: Counter = Counter()
    for ins in root.walk():
        counts.update(ins.operands)
    return counts


def defined_inside(ins: Instr) -> set[Value]:
    """Every value defined in the regions of `ins` (block arguments and results)."""
    out: set[Value] = set()
    for region in ins.regions:
        out.update(region.args)
        for nested in region.walk():
            out.update(nested.results)
    return out


def has_side_effects(ins: Instr) -> bool:
    """Whether removing `ins` (all of whose results are unused) could change what the
    kernel does. `for` / `if` are judged by their contents; a volatile load counts as an
    effect; terminators are structural and never removable on their own."""
    info = OP_INFO[ins.op]
    if info.terminator or ins.op in _NEVER_REMOVABLE:
        return True
    if ins.op in (Op.FOR, Op.IF):
        return any(_effectful(nested) for region in ins.regions for nested in region.walk())
    if ins.op in (Op.LOAD, Op.BLOCK_LOAD):
        return bool(ins.attrs is not None and ins.attrs.volatile)
    if ins.op is Op.INLINE_ASM:
        return not ins.attrs.is_pure
    return not info.pure


def _effectful(ins: Instr) -> bool:
    if ins.op in (Op.YIELD, Op.CONDITION):
        return False
    if ins.op in (Op.FOR, Op.IF):
        return False  # its own contents are visited by the caller's walk
    return has_side_effects(ins)


def is_movable_pure(ins: Instr) -> bool:
    """Pure, region-free, non-memory instructions with results: the ones CSE may merge
    and LICM may hoist. Loads are excluded: a store may come between two of them."""
    info = OP_INFO[ins.op]
    return (info.pure and not ins.regions and not info.terminator and bool(ins.results)
            and info.kind is not Kind.MEMORY)


def resolve(v: Value, mapping: Mapping[Value, Value]) -> Value:
    """Follow a replacement chain to its end."""
    while v in mapping:
        v = mapping[v]
    return v


def region_parents(kernel: Kernel) -> dict[Block, tuple[Instr, int]]:
    """For each region block: the instruction owning it and the region's index."""
    parents: dict[Block, tuple[Instr, int]] = {}
    for ins in kernel.walk():
        for i, region in enumerate(ins.regions):
            parents[region] = (ins, i)
    return parents


def taken_region(ins: Instr, region_index: int) -> tuple[list[Instr], dict[Value, Value]]:
    """Inline a region of an `if` whose branch is known: the region's instructions
    (without its `yield`) and the mapping from the `if`'s results to the yielded values.
    The caller puts the instructions where the `if` was and applies the mapping."""
    region = ins.regions[region_index]
    body = list(region.instrs)
    term = body.pop() if body and body[-1].op is Op.YIELD else None
    yielded = term.operands if term is not None else []
    return body, dict(zip(ins.results, yielded))


def pointer_args(kernel: Kernel) -> list[tuple[str, Value]]:
    """(name, value) of each pointer-typed kernel argument."""
    names = kernel.arg_names
    out = []
    for i, a in enumerate(kernel.args):
        if is_pointer(a.type):
            out.append((names[i] if i < len(names) and names[i] else (a.name or f"arg{i}"), a))
    return out


def flow_sources(v: Value, parents: dict[Block, tuple[Instr, int]]) -> Optional[list[Value]]:
    """The values control flow hands on as `v` unchanged: a for/if/while result's inits,
    yields and branch results, a loop block argument's init and back-edge value; None
    when `v` is not such a value (the dataflow analyses walking values back to
    arguments share this)."""
    owner = v.owner
    if isinstance(owner, Instr):
        if owner.op not in (Op.FOR, Op.IF, Op.WHILE):
            return None
        i = owner.results.index(v)
        if owner.op is Op.FOR:
            return [for_inits(owner)[i], for_yields(owner)[i]]
        if owner.op is Op.IF:
            return [region.terminator.operands[i] for region in owner.regions]
        return [while_condition(owner).operands[1 + i]]
    if isinstance(owner, Block) and owner in parents:
        ins, region = parents[owner]
        i = owner.args.index(v)
        if ins.op is Op.FOR and i > 0:
            return [for_inits(ins)[i - 1], for_yields(ins)[i - 1]]
        if ins.op is Op.WHILE and region == 0:
            return [ins.operands[i], ins.regions[1].terminator.operands[i]]
        if ins.op is Op.WHILE and region == 1:
            return [ins.regions[0].terminator.operands[1 + i]]
    return None
