"""`AxisInfo`: what axis analysis knows of one integer or pointer value, per dimension.

Definitions (all quantities are powers of two; for dimension d, "blocks of length k"
are the runs of k elements along d starting at indices that are multiples of k, for
every fixed index of the other dimensions):
- `contiguity[d] = K`: within each block of length K, each element is the previous one
  plus 1 (for pointers: the address of the next element, i.e. plus the element size).
- `divisibility[d] = D`: the first element of each block of length K is divisible by D
  (pointers: the byte address). With K = 1 that is every element.
- `constancy[d] = C`: within each block of length C all elements are equal.
- `constant`: the value, when the whole value is one known integer.
- `nonnegative`: every element is >= 0 (lets division and remainder keep runs).

A scalar (rank-0 value) has one pseudo-dimension of size 1. Divisibility is capped at
`MAX_DIVISIBILITY` (0 is divisible by everything). This is Triton's AxisInfo lattice;
the GPU backend reads it to choose vector widths (`vector_width`) and the order of
dimensions in a layout (`contiguity_order`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Optional, Sequence

from ..ir.core import Value
from ..ir.types import PointerType, element_of, shape_of

MAX_DIVISIBILITY = 1 << 12

# Widest vector access the GPU backend emits: 16 bytes (ld.global.v4.b32).
MAX_VECTOR_BYTES = 16


def pow2_divisor(n: int) -> int:
    """The largest power of two dividing `n`, capped (0 → the cap)."""
    n = abs(int(n))
    if n == 0:
        return MAX_DIVISIBILITY
    return min(n & -n, MAX_DIVISIBILITY)


def pow2_floor(n: int) -> int:
    """The largest power of two <= n (1 for n < 1)."""
    n = int(n)
    return 1 << (n.bit_length() - 1) if n >= 1 else 1


@dataclass(frozen=True)
class AxisInfo:
    divisibility: tuple[int, ...]
    contiguity: tuple[int, ...]
    constancy: tuple[int, ...]
    constant: Optional[int] = None
    nonnegative: bool = False

    @property
    def rank(self) -> int:
        return len(self.divisibility)

    def block_divisibility(self, d: int, k: int, unit: int = 1) -> int:
        """Divisibility of the elements at indices that are multiples of `k` along `d`.

        Blocks of length k >= K start where blocks of length K do; shorter blocks start
        inside a contiguous run, at first + j·k elements (j·k·unit bytes for pointers
        whose element is `unit` bytes)."""
        if k >= self.contiguity[d]:
            return self.divisibility[d]
        return min(self.divisibility[d], k * unit)

    def element_divisibility(self, unit: int = 1) -> int:
        """A power of two dividing every element (any dimension's blocks of length 1)."""
        return max(self.block_divisibility(d, 1, unit) for d in range(self.rank))

    def __str__(self) -> str:
        extra = f", constant={self.constant}" if self.constant is not None else ""
        extra += ", nonnegative" if self.nonnegative else ""
        return (f"AxisInfo(div={list(self.divisibility)}, contig={list(self.contiguity)}, "
                f"const={list(self.constancy)}{extra})")


def dims(shape: Sequence[int]) -> tuple[int, ...]:
    """The analysed dimensions of a shape: a scalar has one of size 1."""
    return tuple(shape) if shape else (1,)


def element_unit(v: Value) -> int:
    """1 for integers; the pointee's size in bytes for pointers (addresses step by it)."""
    e = element_of(v.type)
    return e.pointee.bytes if isinstance(e, PointerType) else 1


def make(shape: Sequence[int], divisibility: Sequence[int], contiguity: Sequence[int],
         constancy: Sequence[int], constant: Optional[int] = None, nonnegative: bool = False,
         unit: int = 1) -> AxisInfo:
    """An AxisInfo normalised for `shape`: runs clamped to the dimension sizes, a known
    constant made fully constant, and every dimension's divisibility at least the
    divisibility shared by all elements (a fact about all elements holds along each
    dimension)."""
    size = dims(shape)
    if constant is not None:
        d = pow2_divisor(constant)
        return AxisInfo((d,) * len(size), (1,) * len(size), size, constant, constant >= 0)
    div = [max(1, min(int(x), MAX_DIVISIBILITY)) for x in divisibility]
    contig = [max(1, min(int(c), n)) for c, n in zip(contiguity, size)]
    const = [max(1, min(int(c), n)) for c, n in zip(constancy, size)]
    info = AxisInfo(tuple(div), tuple(contig), tuple(const), None, nonnegative)
    every = info.element_divisibility(unit)
    div = [max(x, every) if k == 1 else x for x, k in zip(div, contig)]
    return replace(info, divisibility=tuple(div))


def unknown(shape: Sequence[int]) -> AxisInfo:
    """Nothing known."""
    n = len(dims(shape))
    return AxisInfo((1,) * n, (1,) * n, (1,) * n)


def uniform(shape: Sequence[int], divisibility: int, nonnegative: bool = False) -> AxisInfo:
    """A value equal across the whole tile (a splatted scalar), divisible as given."""
    size = dims(shape)
    return make(shape, (divisibility,) * len(size), (1,) * len(size), size,
                nonnegative=nonnegative)


def join(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds of a value that may be either `a` or `b` (control-flow merge)."""
    return AxisInfo(
        tuple(map(min, a.divisibility, b.divisibility)),
        tuple(map(min, a.contiguity, b.contiguity)),
        tuple(map(min, a.constancy, b.constancy)),
        a.constant if a.constant == b.constant else None,
        a.nonnegative and b.nonnegative,
    )


# ---------------------------------------------------------------- consumers

def bound_width(index: Value, bound: Value, info: Mapping[Value, AxisInfo], axis: int = -1) -> int:
    """How many consecutive elements along `axis` the term `index < bound` can be
    decided for at once from the first element alone: a power of two over which
    `index` runs (+1 per element) and `bound` is constant, so the elements inside are
    the first `clamp(bound - index, 0, width)` (a copy's source size)."""
    shape = shape_of(index.type)
    x, m = info.get(index), info.get(bound)
    if not shape or x is None or m is None or x.rank != len(shape) or m.rank != len(shape):
        return 1
    d = axis % len(shape)
    return max(1, min(pow2_floor(x.contiguity[d]), pow2_floor(m.constancy[d])))


def vector_width(ptr: Value, mask: Optional[Value], info: Mapping[Value, AxisInfo],
                 axis: int = -1, bound: Optional[tuple[Value, Value]] = None) -> int:
    """How many consecutive elements along `axis` (default: innermost) of a load/store
    through `ptr` one thread may access as a single vector: a power of two that divides
    the pointer's contiguity, whose first address is aligned to the vector's size in
    bytes, at most 16 bytes, and over which the mask (if any) is constant. A copy with
    a bound (`index < bound`, decided per vector by `bound_width`) narrows it to that
    width too."""
    shape = shape_of(ptr.type)
    e = element_of(ptr.type)
    if not shape or not isinstance(e, PointerType) or ptr not in info:
        return 1
    p = info[ptr]
    d = axis % len(shape)
    unit = e.pointee.bytes
    width = min(p.contiguity[d], pow2_floor(max(1, MAX_VECTOR_BYTES // unit)))
    while width > 1 and p.block_divisibility(d, width, unit) < width * unit:
        width //= 2
    if mask is not None:
        m = info.get(mask)
        width = min(width, m.constancy[d] if m is not None and m.rank == len(shape) else 1)
    if bound is not None:
        width = min(width, bound_width(bound[0], bound[1], info, d))
    return max(1, width)


def contiguity_order(v: Value, info: Mapping[Value, AxisInfo]) -> list[int]:
    """Dimensions of `v` from most to least contiguous (ties: the later dimension
    first, so row-major tiles keep their natural order): the layout's fastest axis
    is the first entry."""
    rank = len(shape_of(v.type))
    if rank == 0:
        return []
    a = info.get(v)
    contig = a.contiguity if a is not None and a.rank == rank else (1,) * rank
    return sorted(range(rank), key=lambda d: (-contig[d], -d))
