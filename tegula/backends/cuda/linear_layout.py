"""Linear layouts over GF(2): which register of which lane of which warp holds which
element of a tile.

Tile shapes are powers of two, so an element's row-major *flat index* is a bit vector
and each dimension owns a contiguous field of its bits (the last dimension the lowest).
A `LinearLayout` is a linear map over GF(2) from the bits of (register, lane, warp) to
the bits of the flat index: each input bit has a *basis* (an int, the flat index it
selects) and the element held is the XOR of the bases of the set input bits. A zero
basis means the bit duplicates data (broadcast). Because the output is the flat index,
`expand_dims` and `reshape` leave the bases unchanged and `permute`, `broadcast`,
`join` and slicing are maps on bases (`BitMap`), so every layout question (is a
conversion thread-local? which register holds element e?) is one small linear-algebra
routine instead of a case per pair of layout kinds.

This module is the algebra only; the constructors (blocked, slice, ...) are in
`layouts.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


def log2(n: int) -> int:
    """log2 of a power of two (raises on anything else: tile shapes are powers of two)."""
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def dim_fields(shape: Sequence[int]) -> list[tuple[int, int]]:
    """(shift, bit count) of each dimension's field in the row-major flat index."""
    fields, shift = [None] * len(shape), 0
    for d in reversed(range(len(shape))):
        nbits = log2(shape[d])
        fields[d] = (shift, nbits)
        shift += nbits
    return fields  # type: ignore[return-value]


def dim_run(lay: "LinearLayout", dim: int) -> int:
    """How many consecutive elements along `dim` a thread holds together (register
    bases that are the lowest bits of the dimension, wherever they sit in the list)."""
    s, n = dim_fields(lay.shape)[dim]
    k = 0
    while k < n and (1 << (s + k)) in lay.reg:
        k += 1
    return 1 << k


def coords_of(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    return tuple((flat >> s) & ((1 << n) - 1) for s, n in dim_fields(shape))


def flat_of(coords: Sequence[int], shape: Sequence[int]) -> int:
    return sum(c << s for c, (s, _n) in zip(coords, dim_fields(shape)))


@dataclass(frozen=True)
class BitMap:
    """A linear map between flat-index spaces: `images[i]` is the image of input bit i."""

    images: tuple[int, ...]

    def __call__(self, x: int) -> int:
        out, i = 0, 0
        while x:
            if x & 1:
                out ^= self.images[i]
            x >>= 1
            i += 1
        return out

    @staticmethod
    def identity(nbits: int) -> "BitMap":
        return BitMap(tuple(1 << i for i in range(nbits)))


@dataclass(frozen=True)
class LinearLayout:
    """A distributed layout of a tile of `shape` over `len(lane)`=5 lane bits and
    `len(warp)` warp bits; `reg[i]` is the basis of register-index bit i."""

    shape: tuple[int, ...]
    reg: tuple[int, ...]
    lane: tuple[int, ...]
    warp: tuple[int, ...]

    # ------------------------------------------------------------------ basic facts
    @property
    def n_regs(self) -> int:
        return 1 << len(self.reg)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warp)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def distinct_register_groups(self, step: int) -> list[int]:
        """The first registers of the groups of `step` consecutive registers, skipping
        a group that holds the same elements as an earlier one (broadcast register bits:
        writing it again would store the same values twice)."""
        seen: set[int] = set()
        firsts = []
        for r in range(0, self.n_regs, step):
            element = self.reg_element(r)
            if element not in seen:
                seen.add(element)
                firsts.append(r)
        return firsts

    def reg_element(self, r: int) -> int:
        """The flat index register r holds in thread 0 (the register part of any thread)."""
        out, i = 0, 0
        while r:
            if r & 1:
                out ^= self.reg[i]
            r >>= 1
            i += 1
        return out

    def element(self, r: int, lane: int, warp: int) -> int:
        out = self.reg_element(r)
        for i, b in enumerate(self.lane):
            if lane >> i & 1:
                out ^= b
        for i, b in enumerate(self.warp):
            if warp >> i & 1:
                out ^= b
        return out

    def thread_bases(self) -> tuple[int, ...]:
        return self.lane + self.warp

    def thread_bits(self) -> int:
        """The flat-index bits some lane or warp sets."""
        bits = 0
        for image in self.lane + self.warp:
            bits |= image
        return bits

    def is_disjoint(self) -> bool:
        """True when all non-zero bases use pairwise disjoint bits, so XOR == OR == ADD
        when register and thread parts are combined (every blocked layout)."""
        seen = 0
        for b in self.reg + self.lane + self.warp:
            if b & seen:
                return False
            seen |= b
        return True

    def covers(self) -> bool:
        """True when every element of the tile is held by some (register, thread)."""
        return rank_of(self.reg + self.lane + self.warp) == sum(n for _s, n in dim_fields(self.shape))

    def map_bases(self, m: BitMap, shape: Sequence[int]) -> "LinearLayout":
        """The layout whose bases are `m` applied to these (a view of the same data)."""
        return LinearLayout(tuple(shape), tuple(m(b) for b in self.reg),
                            tuple(m(b) for b in self.lane), tuple(m(b) for b in self.warp))

    def with_shape(self, shape: Sequence[int]) -> "LinearLayout":
        return LinearLayout(tuple(shape), self.reg, self.lane, self.warp)

    def drop_dependent_regs(self) -> "LinearLayout":
        """Remove register bits that are zero or in the span of earlier ones (they would
        only hold copies of other registers)."""
        kept: list[int] = []
        for b in self.reg:
            if b and solve(kept, b) is None:
                kept.append(b)
        return LinearLayout(self.shape, tuple(kept), self.lane, self.warp)

    def __str__(self) -> str:
        def fmt(bs):
            return "[" + ", ".join(str(coords_of(b, self.shape)) if len(self.shape) > 1 else str(b)
                                   for b in bs) + "]"
        return f"linear<reg={fmt(self.reg)}, lane={fmt(self.lane)}, warp={fmt(self.warp)}>"


# ---------------------------------------------------------------------- GF(2) algebra

def rank_of(vectors: Sequence[int]) -> int:
    pivots: dict[int, int] = {}
    for v in vectors:
        v = _reduce(pivots, v)
        if v:
            pivots[v.bit_length() - 1] = v
    return len(pivots)


def _reduce(pivots: dict[int, int], v: int) -> int:
    while v:
        top = v.bit_length() - 1
        if top not in pivots:
            return v
        v ^= pivots[top]
    return 0


def solve(bases: Sequence[int], target: int) -> Optional[int]:
    """An index mask `x` with XOR of `bases[i]` over set bits i == target, or None.

    Gaussian elimination over GF(2); with dependent bases any solution is returned."""
    pivots: dict[int, tuple[int, int]] = {}  # top bit -> (vector, combination mask)
    for i, b in enumerate(bases):
        v, comb = b, 1 << i
        while v:
            top = v.bit_length() - 1
            if top not in pivots:
                pivots[top] = (v, comb)
                break
            pv, pc = pivots[top]
            v, comb = v ^ pv, comb ^ pc
    v, comb = target, 0
    while v:
        top = v.bit_length() - 1
        if top not in pivots:
            return None
        pv, pc = pivots[top]
        v, comb = v ^ pv, comb ^ pc
    return comb


def locate(layout: LinearLayout, flat: int) -> Optional[tuple[int, int, int]]:
    """The inverse of a layout at one element: a (register, lane, warp) holding `flat`,
    or None when no thread holds it."""
    bases = layout.reg + layout.lane + layout.warp
    x = solve(bases, flat)
    if x is None:
        return None
    nr, nl = len(layout.reg), len(layout.lane)
    return x & ((1 << nr) - 1), (x >> nr) & ((1 << nl) - 1), x >> (nr + nl)


def compose(outer: BitMap, inner: BitMap) -> BitMap:
    """outer ∘ inner: apply `inner`, then `outer`."""
    return BitMap(tuple(outer(img) for img in inner.images))


def local_register_map(src: LinearLayout, dst: LinearLayout,
                       view: Optional[BitMap] = None) -> Optional[list[int]]:
    """If every thread already holds, in `src`, each element `dst` gives it, return for
    each `dst` register the `src` register holding its value; else None.

    `view` maps a flat index of `dst`'s shape to the flat index of the `src` element
    whose value it carries (identity for a plain conversion; a projection for
    broadcast; a bit permutation for permute/reshape). The test is linear: the thread
    bases must agree after the view, and each register basis must lie in the span of
    `src`'s register bases."""
    m = view or BitMap.identity(64)
    if len(src.lane) != len(dst.lane) or len(src.warp) != len(dst.warp):
        return None
    for a, b in zip(src.thread_bases(), dst.thread_bases()):
        if m(b) != a:
            return None
    reg_solutions = []
    for b in dst.reg:
        x = solve(src.reg, m(b))
        if x is None:
            return None
        reg_solutions.append(x)
    out = []
    for r in range(dst.n_regs):
        x, i = 0, 0
        while r >> i:
            if r >> i & 1:
                x ^= reg_solutions[i]
            i += 1
        out.append(x)
    return out


# ---------------------------------------------------------------------- view maps

def projection(shape: Sequence[int], keep: Sequence[bool]) -> BitMap:
    """Flat index of `shape` → flat index of the shape made of the dims marked in `keep`
    (in order), dropping the others' bits (reductions, broadcast sources)."""
    fields = dim_fields(shape)
    kept_shape = [shape[d] for d in range(len(shape)) if keep[d]]
    kept_fields = iter(dim_fields(kept_shape))
    images = [0] * sum(n for _s, n in fields)
    for d, (s, n) in enumerate(fields):
        if not keep[d]:
            continue
        ks, _kn = next(kept_fields)
        for k in range(n):
            images[s + k] = 1 << (ks + k)
    return BitMap(tuple(images))


def broadcast_view(src_shape: Sequence[int], dst_shape: Sequence[int]) -> BitMap:
    """dst flat index → src flat index for a broadcast (size-1 src dims have no bits)."""
    return projection(dst_shape, [s == d for s, d in zip(src_shape, dst_shape)])


def permute_view(src_shape: Sequence[int], order: Sequence[int]) -> BitMap:
    """dst flat index → src flat index where dst dim i is src dim order[i]."""
    dst_shape = [src_shape[o] for o in order]
    sf, df = dim_fields(src_shape), dim_fields(dst_shape)
    images = [0] * sum(n for _s, n in df)
    for i, o in enumerate(order):
        ds, n = df[i]
        ss, _ = sf[o]
        for k in range(n):
            images[ds + k] = 1 << (ss + k)
    return BitMap(tuple(images))


def inverse_permutation(order: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(order)
    for i, o in enumerate(order):
        inv[o] = i
    return tuple(inv)
