"""Constructors of distributed layouts (as `LinearLayout`s) and the views the shape ops
induce: blocked layouts (Triton's sizePerThread / threadsPerWarp / warpsPerCTA / order),
slice layouts (a reduction's result), and the layouts of expand_dims, broadcast,
reshape, permute, join and split results, plus the layouts special lowerings want
(scans, the FMA dot).

Everything here is pure layout algebra on top of `linear_layout`; which value gets which
layout is decided in `assign_layouts`.
"""
from __future__ import annotations

from typing import Optional, Sequence

from .linear_layout import (
    BitMap,
    LinearLayout,
    broadcast_view,
    dim_fields,
    inverse_permutation,
    log2,
    permute_view,
    projection,
)

WARP_SIZE = 32
LANE_BITS = 5


def blocked(shape: Sequence[int], size_per_thread: Sequence[int], threads_per_warp: Sequence[int],
            warps_per_cta: Sequence[int], order: Sequence[int]) -> LinearLayout:
    """Triton's blocked layout: along each dimension a thread holds `size_per_thread`
    consecutive elements, then the lanes, then the warps cover the next bits; `order`
    lists dimensions fastest first. Where the tile is larger than the CTA tile the
    pattern repeats in more registers; where smaller, the extra lanes/warps duplicate."""
    shape = tuple(shape)
    fields = dim_fields(shape)
    taken = [0] * len(shape)

    def take(d: int, count: int) -> list[int]:
        out = []
        for _ in range(count):
            s, n = fields[d]
            out.append(1 << (s + taken[d]) if taken[d] < n else 0)
            taken[d] += 1
        return out

    reg = [b for d in order for b in take(d, log2(size_per_thread[d]))]
    lane = [b for d in order for b in take(d, log2(threads_per_warp[d]))]
    warp = [b for d in order for b in take(d, log2(warps_per_cta[d]))]
    rep = [b for d in order for b in take(d, max(0, fields[d][1] - taken[d]))]
    assert len(lane) == LANE_BITS, threads_per_warp
    return LinearLayout(shape, tuple(reg + rep), tuple(lane), tuple(warp)).drop_dependent_regs()


def default_blocked(shape: Sequence[int], num_warps: int, vec: int = 1,
                    order: Optional[Sequence[int]] = None) -> LinearLayout:
    """The blocked layout Triton gives a tile by default: `vec` consecutive elements per
    thread along the fastest dimension `order[0]`, lanes then warps spread fastest
    dimension first, whatever is left over on the slowest dimension."""
    rank = len(shape)
    order = list(order) if order is not None else list(reversed(range(rank)))
    spt = [1] * rank
    spt[order[0]] = max(1, min(vec, shape[order[0]]))
    tpw, wpc = [1] * rank, [1] * rank
    lanes, warps = WARP_SIZE, num_warps
    for d in order[:-1]:
        room = max(1, shape[d] // spt[d])
        tpw[d] = min(lanes, room)
        lanes //= tpw[d]
        wpc[d] = min(warps, max(1, room // tpw[d]))
        warps //= wpc[d]
    tpw[order[-1]] *= lanes
    wpc[order[-1]] *= warps
    return blocked(shape, spt, tpw, wpc, order)


def transposing_copy_layout(shape: Sequence[int], num_warps: int, vec: int, fast: int, slot_fast: int,
                            word: int, lanes_fast: int = 1) -> LinearLayout:
    """The layout of a 2-D copy whose destination keeps another dimension contiguous
    than its source does (an 8-bit wgmma operand stored K-major, copied from a row-major
    B): each thread holds `vec` elements along the source-contiguous dimension `fast`
    (one wide access) times `word` consecutive elements along `slot_fast`, so the
    transposed elements leave it `word` at a time, one 32-bit shared store each. Of the
    32 lanes, `lanes_fast` go along `fast` and the rest along `slot_fast`: with one, the
    lanes of a store write one row of the destination, no bank twice (its swizzle
    permutes whole 16-byte chunks of a row), while a load's lanes read as many rows;
    each more lane along `fast` shares rows between a load's lanes and banks between a
    store's. Warps go along `fast`."""
    rank = len(shape)
    assert rank == 2 and fast != slot_fast
    spt = [1] * rank
    spt[fast] = max(1, min(vec, shape[fast]))
    spt[slot_fast] = max(1, min(word, shape[slot_fast]))
    tpw, wpc = [1] * rank, [1] * rank
    tpw[slot_fast] = min(WARP_SIZE // lanes_fast, max(1, shape[slot_fast] // spt[slot_fast]))
    tpw[fast] = WARP_SIZE // tpw[slot_fast]
    wpc[fast] = min(num_warps, max(1, shape[fast] // (spt[fast] * tpw[fast])))
    wpc[slot_fast] = num_warps // wpc[fast]
    return blocked(shape, spt, tpw, wpc, [fast, slot_fast])


def slice_layout(parent: LinearLayout, axis: int) -> Optional[LinearLayout]:
    """The layout of a reduction along `axis` of a tile in `parent`: the axis' bits are
    dropped, so lanes/warps that spread the axis now hold copies. None for a rank-1
    parent (the result is a scalar, which has no layout)."""
    if len(parent.shape) == 1:
        return None
    keep = [d != axis for d in range(len(parent.shape))]
    shape = tuple(s for d, s in enumerate(parent.shape) if d != axis)
    return parent.map_bases(projection(parent.shape, keep), shape).drop_dependent_regs()


def embedding(src_shape: Sequence[int], dst_shape: Sequence[int]) -> BitMap:
    """src flat index → dst flat index when src is dst with some dims set to 1."""
    sf, df = dim_fields(src_shape), dim_fields(dst_shape)
    images = [0] * sum(n for _s, n in sf)
    for (ss, sn), (ds, _dn) in zip(sf, df):
        for k in range(sn):
            images[ss + k] = 1 << (ds + k)
    return BitMap(tuple(images))


def broadcast_source(dst: LinearLayout, src_shape: Sequence[int]) -> LinearLayout:
    """The layout a broadcast's operand needs so that the broadcast to `dst` is free."""
    return dst.map_bases(broadcast_view(src_shape, dst.shape), src_shape).drop_dependent_regs()


def broadcast_fill(src: LinearLayout, dst_shape: Sequence[int]) -> LinearLayout:
    """A layout of the broadcast result that keeps every thread's data where it is: the
    new dimensions' bits go to the lanes/warps that held copies, then to registers."""
    e = embedding(src.shape, dst_shape)
    free = []
    for d, (s, n) in enumerate(dim_fields(dst_shape)):
        if src.shape[d] == 1:
            free.extend(1 << (s + k) for k in range(n))
    free.sort()

    def fill(bases):
        out = []
        for b in bases:
            b = e(b)
            if b == 0 and free:
                b = free.pop(0)
            out.append(b)
        return tuple(out)

    lane, warp = fill(src.lane), fill(src.warp)
    reg = tuple(e(b) for b in src.reg) + tuple(free)
    return LinearLayout(tuple(dst_shape), reg, lane, warp)


def permute_layout(src: LinearLayout, order: Sequence[int]) -> LinearLayout:
    dst_shape = tuple(src.shape[o] for o in order)
    return src.map_bases(permute_view(dst_shape, inverse_permutation(order)), dst_shape)


def permute_source(dst: LinearLayout, order: Sequence[int]) -> LinearLayout:
    """The operand layout whose permutation is `dst`."""
    src_shape = [0] * len(order)
    for i, o in enumerate(order):
        src_shape[o] = dst.shape[i]
    return dst.map_bases(permute_view(src_shape, order), src_shape)


def join_layout(src: LinearLayout) -> LinearLayout:
    """join(a, b) adds a last dimension of 2: the pair sits in adjacent registers."""
    def shl(bs):
        return tuple(b << 1 for b in bs)
    return LinearLayout(src.shape + (2,), (1,) + shl(src.reg), shl(src.lane), shl(src.warp))


def split_ready(src: LinearLayout) -> LinearLayout:
    """`src` if the last dimension (of size 2) is in registers, else the closest layout
    where it is (what a split's operand is converted to)."""
    if 1 in src.reg:
        return src
    lane, warp, reg = list(src.lane), list(src.warp), list(src.reg)
    for bases in (lane, warp):
        if 1 in bases:
            i = bases.index(1)
            if reg:
                bases[i], reg[0] = reg[0], 1
            else:
                bases[i], reg = 0, [1]
            break
    else:
        reg.insert(0, 1)
    return LinearLayout(src.shape, tuple(reg), tuple(lane), tuple(warp))


def split_layout(src: LinearLayout) -> tuple[LinearLayout, int]:
    """The halves' layout and the register bit of `src` that selects the half."""
    j = src.reg.index(1)
    reg = tuple(b >> 1 for i, b in enumerate(src.reg) if i != j)
    return LinearLayout(src.shape[:-1], reg, tuple(b >> 1 for b in src.lane),
                        tuple(b >> 1 for b in src.warp)), j


def contiguous_regs(layout: LinearLayout, dim: int) -> int:
    """How many consecutive registers (from register 0) hold consecutive elements along
    `dim`: the vector width the layout allows along that dimension."""
    s, n = dim_fields(layout.shape)[dim]
    k = 0
    while k < len(layout.reg) and k < n and layout.reg[k] == 1 << (s + k):
        k += 1
    return 1 << k


# ---------------------------------------------------------------- special purposes

def scan_layout(shape: Sequence[int], axis: int, num_warps: int, fast: Optional[int] = None) -> LinearLayout:
    """A blocked layout for a scan along `axis`: lanes, then warps, go to the other
    dimensions first (the fastest first) and only what they cannot use to the axis;
    each thread holds one contiguous chunk of the axis, the lanes and then the warps
    left to it consecutive chunks (no repetition along the axis). A tile of many
    independent scans (fla's cumsum over [64, 64] chunks) then scans each column in
    registers, with no shuffles and no exchange between warps, as Triton's layout
    does; a 1-D scan spreads over lanes and warps (Hillis-Steele across them). `fast`:
    the dimension memory runs along (the last by default), given lanes first."""
    rank = len(shape)
    n = shape[axis]
    tpw, wpc, spt = [1] * rank, [1] * rank, [1] * rank
    lanes, warps = WARP_SIZE, num_warps
    others = [d for d in reversed(range(rank)) if d != axis]
    if fast is not None and fast != axis:
        others = [fast] + [d for d in others if d != fast]
    for d in others:
        tpw[d] = min(lanes, shape[d])
        lanes //= tpw[d]
    for d in others:
        wpc[d] = min(warps, max(1, shape[d] // tpw[d]))
        warps //= wpc[d]
    for d in others:
        spt[d] = max(1, shape[d] // (tpw[d] * wpc[d]))
    tpw[axis] = min(lanes, n)
    wpc[axis] = min(warps, max(1, n // tpw[axis]))
    spt[axis] = max(1, n // (tpw[axis] * wpc[axis]))
    # lanes or warps the shape cannot use repeat along the last dimension
    last = others[-1] if others else axis
    tpw[last] *= lanes // tpw[axis]
    wpc[last] *= warps // wpc[axis]
    return blocked(shape, spt, tpw, wpc, [axis] + others)


def warp_run(layout: LinearLayout, dim: int, vec: int) -> tuple[int, int]:
    """(elements a thread moves per access, elements a warp's access covers
    contiguously) along `dim`: the thread's lowest register bits along it, up to `vec`
    elements, then the lanes that continue the run."""
    s, n = dim_fields(layout.shape)[dim]
    k = 0
    while k < n and (1 << k) < vec and k < len(layout.reg) and layout.reg[k] == 1 << (s + k):
        k += 1
    per_thread = 1 << k
    for b in layout.lane:
        if k >= n or b != 1 << (s + k):
            break
        k += 1
    return per_thread, 1 << k


def scan_ready(layout: LinearLayout, axis: int) -> bool:
    """Whether a scan along `axis` can run in `layout` directly: every basis touching
    the axis is one axis bit; going up the axis the bits are held by registers, then
    lanes at consecutive lane-bit positions, then warps at consecutive positions."""
    s, n = dim_fields(layout.shape)[axis]
    mask = ((1 << n) - 1) << s
    holder: dict[int, tuple[str, int]] = {}
    for kind, bases in (("r", layout.reg), ("l", layout.lane), ("w", layout.warp)):
        for i, b in enumerate(bases):
            if b & mask:
                if b & ~mask or b & (b - 1):
                    return False
                holder[b.bit_length() - 1] = (kind, i)
    if len(holder) != n:
        return False
    seq = [holder[s + k] for k in range(n)]
    kinds = "".join(k for k, _ in seq)
    if kinds != "".join(sorted(kinds, key="rlw".index)):
        return False
    for kind in "lw":
        pos = [i for k, i in seq if k == kind]
        if pos and pos != list(range(pos[0], pos[0] + len(pos))):
            return False
    return True


def fma_dot_layout(m: int, n: int, num_warps: int) -> LinearLayout:
    """The accumulator layout of the FMA dot: each thread owns a near-square sub-tile
    (so each value read from the operands feeds several FMAs)."""
    tn = min(8, n)
    tm = WARP_SIZE // tn
    if tm > m:
        tm = m
        tn = WARP_SIZE // tm
    wm = min(num_warps, max(1, m // tm))
    wn = num_warps // wm
    sm = max(1, m // (tm * wm))
    sn = max(1, n // (tn * wn))
    return blocked((m, n), (sm, sn), (tm, tn), (wm, wn), (1, 0))


def view_for_permute(src_shape: Sequence[int], order: Sequence[int]) -> BitMap:
    """dst flat → src flat of a permute (what `local_register_map` takes)."""
    return permute_view(src_shape, order)
