"""The CUDA backend's tile encodings: what a `tgir` tile type says about where its
elements live, as small hashable values with a text form and `to_linear(shape)`.

- `#blocked<spt, tpw, wpc, order>`: Triton's blocked layout (`layouts.blocked`);
- `#mma<version, warps>`: the accumulator of a tensor-core instruction (mma.sync v2,
  wgmma v3) over warps (M, N); the dot that produces it is lowered to that
  instruction, its operand types and shape following from the dot's types;
- `#dot_op<idx, parent, k_width>`: an operand fragment of the parent `#mma`
  (wgmma's register A for version 3, the mma.sync fragments for version 2);
- `#slice<dim, size, parent>`: a reduction of a `parent`-encoded tile along `dim`
  (of `size` elements);
- `#linear<reg, lane, warp>`: any other layout, by its GF(2) bases (flat-index ints of
  the tile's shape), so every `LinearLayout` has an exact text form.

The `LinearLayout` stays the single source of truth for where elements live; the tag
says which instruction made them. `encoding_for(layout, candidates)` picks the most
specific encoding equal to a layout (checked by comparing `to_linear`, never assumed).
Importing this module registers the parsers with `ir.encodings`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Optional, Sequence

from ...ir.encodings import fields, format_ints, int_list, parse_encoding, register_encoding
from . import layouts as LY
from .linear_layout import LinearLayout, dim_fields
from .mma import MmaChoice
from .mma_layouts import mma_v2_accumulator, mma_v2_operand, mma_v3_accumulator, wgmma_register_a


class Encoding:
    """Base of the encodings: `to_linear(shape)` is cached per (encoding, shape)."""

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        return _linear(self, tuple(shape))

    def build(self, shape: tuple[int, ...]) -> LinearLayout:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return str(self)


@lru_cache(maxsize=4096)
def _linear(enc: Encoding, shape: tuple[int, ...]) -> LinearLayout:
    return enc.build(shape)


@dataclass(frozen=True, repr=False)
class BlockedEncoding(Encoding):
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        rank = len(shape)
        parts = (self.size_per_thread, self.threads_per_warp, self.warps_per_cta, self.order)
        if any(len(p) != rank for p in parts) or sorted(self.order) != list(range(rank)):
            raise ValueError(f"{self} does not describe a rank-{rank} tile")
        lanes = 1
        for t in self.threads_per_warp:
            lanes *= t
        if lanes != LY.WARP_SIZE or any(v <= 0 or v & (v - 1) for p in parts[:3] for v in p):
            raise ValueError(f"{self}: sizes are powers of two and a warp has {LY.WARP_SIZE} lanes")
        return LY.blocked(shape, self.size_per_thread, self.threads_per_warp, self.warps_per_cta, self.order)

    def __str__(self) -> str:
        return (f"#blocked<spt={format_ints(self.size_per_thread)}, tpw={format_ints(self.threads_per_warp)}, "
                f"wpc={format_ints(self.warps_per_cta)}, order={format_ints(self.order)}>")

    @staticmethod
    def parse(body: str) -> "BlockedEncoding":
        f = fields(body)
        return BlockedEncoding(int_list(f["spt"]), int_list(f["tpw"]), int_list(f["wpc"]), int_list(f["order"]))


@dataclass(frozen=True, repr=False)
class MmaEncoding(Encoding):
    """The accumulator of mma.sync (`version` 2) or wgmma (3) over `warps` (M, N); the
    instruction's operand types and shape follow from the dot's own types
    (`mma.mma_instruction`), as in Triton's `#mma`."""

    version: int
    warps: tuple[int, int]

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        if self.version == 3:
            return mma_v3_accumulator(shape, self.warps)
        if self.version == 2:
            return mma_v2_accumulator(shape, self.warps)
        raise ValueError(f"#mma version {self.version} is not 2 (mma.sync) or 3 (wgmma)")

    def __str__(self) -> str:
        return f"#mma<version={self.version}, warps={format_ints(self.warps)}>"

    @staticmethod
    def parse(body: str) -> "MmaEncoding":
        f = fields(body)
        warps = int_list(f["warps"])
        if len(warps) != 2:
            raise ValueError(f"#mma warps are [M, N], got {list(warps)}")
        return MmaEncoding(int(f["version"]), (warps[0], warps[1]))

    @staticmethod
    def of(choice: MmaChoice) -> "MmaEncoding":
        return MmaEncoding(choice.version, tuple(choice.warps_per_cta))


@dataclass(frozen=True, repr=False)
class DotOperandEncoding(Encoding):
    op_idx: int
    parent: MmaEncoding
    k_width: int

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        warps = self.parent.warps
        if self.parent.version == 3:
            if self.op_idx != 0:
                raise ValueError("wgmma reads only its A operand from registers")
            return wgmma_register_a(shape, warps, self.k_width)
        return mma_v2_operand(self.op_idx, shape, warps, self.k_width)

    def __str__(self) -> str:
        return f"#dot_op<idx={self.op_idx}, k_width={self.k_width}, parent={self.parent}>"

    @staticmethod
    def parse(body: str) -> "DotOperandEncoding":
        f = fields(body)
        parent = parse_encoding(f["parent"])
        if not isinstance(parent, MmaEncoding):
            raise ValueError(f"a #dot_op's parent is an #mma, got {parent}")
        return DotOperandEncoding(int(f["idx"]), parent, int(f["k_width"]))


@dataclass(frozen=True, repr=False)
class SliceEncoding(Encoding):
    dim: int
    size: int           # the parent's extent along `dim`
    parent: Encoding

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        parent_shape = shape[:self.dim] + (self.size,) + shape[self.dim:]
        lay = LY.slice_layout(self.parent.to_linear(parent_shape), self.dim)
        if lay is None:
            raise ValueError("a slice of a rank-1 parent is a scalar")
        return lay

    def __str__(self) -> str:
        return f"#slice<dim={self.dim}, size={self.size}, parent={self.parent}>"

    @staticmethod
    def parse(body: str) -> "SliceEncoding":
        f = fields(body)
        return SliceEncoding(int(f["dim"]), int(f["size"]), parse_encoding(f["parent"]))


@dataclass(frozen=True, repr=False)
class LinearEncoding(Encoding):
    reg: tuple[int, ...]
    lane: tuple[int, ...]
    warp: tuple[int, ...]

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        numel = 1
        for d in shape:
            numel *= d
        if any(b >= numel for b in self.reg + self.lane + self.warp):
            raise ValueError(f"a basis of {self} lies outside a tile of shape {list(shape)}")
        return LinearLayout(shape, self.reg, self.lane, self.warp)

    def __str__(self) -> str:
        return f"#linear<reg={format_ints(self.reg)}, lane={format_ints(self.lane)}, warp={format_ints(self.warp)}>"

    @staticmethod
    def parse(body: str) -> "LinearEncoding":
        f = fields(body)
        return LinearEncoding(int_list(f["reg"]), int_list(f["lane"]), int_list(f["warp"]))


register_encoding("blocked", BlockedEncoding.parse)
register_encoding("mma", MmaEncoding.parse)
register_encoding("dot_op", DotOperandEncoding.parse)
register_encoding("slice", SliceEncoding.parse)
register_encoding("linear", LinearEncoding.parse)


# ---------------------------------------------------------------------- naming a layout

def _dim_of_bit(shape: Sequence[int], basis: int) -> Optional[int]:
    if basis == 0 or basis & (basis - 1):
        return None
    bit = basis.bit_length() - 1
    for d, (s, n) in enumerate(dim_fields(shape)):
        if s <= bit < s + n:
            return d
    return None


def _count_per_dim(shape: Sequence[int], bases: Sequence[int], order: Sequence[int]) -> Optional[list[int]]:
    """How many of `bases` (one level: lanes or warps) each dimension takes, as
    `layouts.blocked` hands them out: dimensions in `order`, a zero basis going to the
    dimension that was being filled (it had run out of bits)."""
    counts = [0] * len(shape)
    current = order[0]
    for b in bases:
        d = _dim_of_bit(shape, b) if b else current
        if d is None:
            return None
        if order.index(d) < order.index(current):
            return None
        counts[d] += 1
        current = d
    return counts


def _precedences(shape: Sequence[int], layout: LinearLayout, spt: Sequence[int]) -> set[tuple[int, int]]:
    """Pairs (a, b): dimension a must come before b in the `order` of any `#blocked`
    equal to `layout`. `layouts.blocked` hands out each level's bits dimension by
    dimension in `order` (registers: the per-thread elements, then the repeats), so in
    each of those sequences a basis of a dimension followed by one of another says so."""
    n_own = sum(c.bit_length() - 1 for c in spt)
    before: set[tuple[int, int]] = set()
    for seq in (layout.reg[:n_own], layout.reg[n_own:], layout.lane, layout.warp):
        dims = [d for d in (_dim_of_bit(shape, b) for b in seq if b) if d is not None]
        before.update((a, b) for a, b in zip(dims, dims[1:]) if a != b)
    return before


def _orders(rank: int, before: set[tuple[int, int]]) -> Iterable[tuple[int, ...]]:
    """The permutations of range(rank) that respect `before`, in
    `itertools.permutations` order: that order's candidates less the ones that cannot
    match, without visiting all rank! of them (`tl.sort` of 1024 elements works on
    rank-10 tiles: 3.6M permutations took minutes per layout)."""
    preds = {d: {a for a, b in before if b == d} for d in range(rank)}

    def extend(placed: list[int], left: list[int]) -> Iterable[tuple[int, ...]]:
        if not left:
            yield tuple(placed)
            return
        for d in left:
            if preds[d] <= set(placed):
                yield from extend(placed + [d], [e for e in left if e != d])
    return extend([], list(range(rank)))


def blocked_of(layout: LinearLayout) -> Optional[BlockedEncoding]:
    """The `#blocked` encoding equal to `layout`, or None when it is not one: the first
    `order` (in permutation order) whose encoding builds `layout`."""
    shape = layout.shape
    rank = len(shape)
    fields_ = dim_fields(shape)
    spt = [1] * rank
    for d in range(rank):
        s, n = fields_[d]
        k = 0
        while k < n and (1 << (s + k)) in layout.reg:
            k += 1
        spt[d] = 1 << k
    for order in _orders(rank, _precedences(shape, layout, spt)):
        lanes = _count_per_dim(shape, layout.lane, order)
        warps = _count_per_dim(shape, layout.warp, order)
        if lanes is None or warps is None:
            continue
        enc = BlockedEncoding(tuple(spt), tuple(1 << c for c in lanes), tuple(1 << c for c in warps), tuple(order))
        try:
            if enc.to_linear(shape) == layout:
                return enc
        except (AssertionError, ValueError):
            continue
    return None


def encoding_for(layout: LinearLayout, candidates: Iterable[Encoding] = ()) -> Encoding:
    """The most specific encoding whose layout for `layout.shape` is `layout`: the first
    equal candidate (the kernel's mma, operand and slice encodings), else `#blocked`,
    else `#linear`."""
    for enc in candidates:
        try:
            if enc.to_linear(layout.shape) == layout:
                return enc
        except (AssertionError, ValueError, IndexError):
            continue
    return blocked_of(layout) or LinearEncoding(layout.reg, layout.lane, layout.warp)


def layout_of(t: Any) -> Optional[LinearLayout]:
    """The layout a `tgir` tile type's encoding gives its shape (None for scalars and
    types without an encoding)."""
    enc = getattr(t, "encoding", None)
    return enc.to_linear(t.shape) if enc is not None else None
