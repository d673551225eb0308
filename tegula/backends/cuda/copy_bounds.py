"""Copy bounds: a pipelined load's mask split into the terms that are uniform over each
copy and one bound along the copies' run, so that an element-granular edge along the
contiguous dimension costs no scalar copies.

A descriptor block (or a hand-written tile) along a contiguous dimension of unknown
size `K` is masked `rows_ok & (k0 + j < K)`: the mask changes inside a 16-byte run
wherever `K` is not a multiple of 8 (fp16), so the axis analysis can only prove it
constant per element and the copies would be scalar. Yet the elements of a run that
are inside are always its *first* `clamp(K - (k0 + j0), 0, run)`: exactly what a
`cp.async` with a computed source size reads, the hardware zero-filling the rest.

`split_bound(load, info)` finds such a term `index < bound` (or `bound > index`) among
the mask's AND terms (looking through `and` and `broadcast`), where `index` runs along
the pointers' most contiguous dimension and `bound` is constant there
(`passes.bound_width`), and only when splitting it off lets the copies be wider than
the whole mask allows. The pipeliner then issues `async_copy ..., mask_rest, index,
bound {has_bound}` (`ir.attrs.AsyncCopyAttrs`; `bounded_mask` builds the operands for the
iteration copied), whose meaning is the original mask's;
the lowering (`lower_shared.lower_async_copy`) turns the bound into the source size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from ...ir.accessors import memory_operands
from ...ir.builder import Builder
from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import I1, ScalarType, TileType, element_of, shape_of
from ...passes import AxisInfo, bound_width, contiguity_order, vector_width


@dataclass(frozen=True)
class CopyBound:
    terms: tuple[Value, ...]  # the mask's other AND terms (shapes that broadcast to the load's)
    index: Value              # runs along the copies' dimension
    bound: Value              # constant along it


def _and_terms(v: Value) -> list[Value]:
    ins = v.owner
    if isinstance(ins, Instr) and ins.op is Op.AND and element_of(v.type) == I1:
        return _and_terms(ins.operands[0]) + _and_terms(ins.operands[1])
    if (isinstance(ins, Instr) and ins.op is Op.BROADCAST and isinstance(ins.operands[0].type, TileType)
            and len(shape_of(ins.operands[0].type)) == len(shape_of(v.type))):
        return _and_terms(ins.operands[0])
    return [v]


def _comparison(term: Value) -> Optional[tuple[Value, Value]]:
    """(index, bound) of a term `index < bound` / `bound > index` on signed integers."""
    ins = term.owner
    if not isinstance(ins, Instr) or ins.op not in (Op.LT, Op.GT):
        return None
    x, m = ins.operands if ins.op is Op.LT else reversed(ins.operands)
    e = element_of(x.type)
    if not (isinstance(e, ScalarType) and e.is_int and e.is_signed and isinstance(x.type, TileType)
            and x.type == m.type):
        return None
    return x, m


def _constancy(term: Value, d: int, size: int, info: Mapping[Value, AxisInfo]) -> int:
    """Constancy along `d` of a term broadcast to a dimension of `size` elements."""
    if shape_of(term.type)[d] == 1:
        return size
    a = info.get(term)
    return a.constancy[d] if a is not None and a.rank == len(shape_of(term.type)) else 1


def split_bound(load: Instr, info: Mapping[Value, AxisInfo]) -> Optional[CopyBound]:
    """The bound to split off `load`'s mask (module docstring), or None where the mask
    as a whole already allows copies as wide as the pointers do, or no term fits."""
    mem = memory_operands(load)
    ptr, mask = mem.pointer, mem.mask
    if mask is None or not isinstance(ptr.type, TileType):
        return None
    shape = shape_of(ptr.type)
    d = contiguity_order(ptr, info)[0]
    whole = vector_width(ptr, mask, info, d)
    widest = vector_width(ptr, None, info, d)
    if whole >= widest:
        return None
    terms = _and_terms(mask)
    best, best_width = None, 1
    for t in terms:
        found = _comparison(t)
        if found is None or shape_of(t.type)[d] != shape[d]:
            continue
        w = bound_width(found[0], found[1], info, d)
        if w > best_width:
            best, best_width = t, w
    if best is None:
        return None
    rest = tuple(t for t in terms if t is not best)
    width = min([widest, best_width] + [_constancy(t, d, shape[d], info) for t in rest])
    if width <= whole:
        return None
    index, bound = _comparison(best)
    return CopyBound(rest, index, bound)


def bounded_mask(bb: Builder, split: CopyBound, mapping: dict[Value, Value],
                  shape: tuple[int, ...]) -> tuple[Optional[Value], list[Value]]:
    """The AND of the split mask's other terms (None if there are none) and [index,
    bound], for the iteration `mapping` binds, each broadcast to the load's shape."""
    def fit(v: Value) -> Value:
        v = mapping.get(v, v)
        return v if shape_of(v.type) == shape else bb.broadcast(v, shape)
    mask = None
    for t in split.terms:
        mask = fit(t) if mask is None else bb.op1(Op.AND, mask, fit(t))
    return mask, [fit(split.index), fit(split.bound)]
