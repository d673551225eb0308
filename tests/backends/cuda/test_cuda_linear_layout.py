"""Linear layouts over GF(2): constructors, views, and the local-conversion test."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tegula.backends.cuda import layouts as LY
from tegula.backends.cuda.linear_layout import (
    LinearLayout,
    broadcast_view,
    compose,
    coords_of,
    dim_fields,
    flat_of,
    local_register_map,
    locate,
    permute_view,
    solve,
)


def held(lay: LinearLayout) -> dict[tuple[int, int, int], int]:
    """(reg, lane, warp) -> flat element, by brute force."""
    return {(r, ln, w): lay.element(r, ln, w)
            for r in range(lay.n_regs) for ln in range(32) for w in range(lay.num_warps)}


@pytest.mark.parametrize("shape,spt,tpw,wpc,order", [
    ((1024,), (4,), (32,), (4,), (0,)),
    ((64, 128), (1, 4), (1, 32), (4, 1), (1, 0)),
    ((32, 32), (2, 2), (4, 8), (2, 2), (1, 0)),
    ((16, 64), (1, 4), (2, 16), (4, 1), (0, 1)),
])
def test_blocked_layout_matches_its_definition(shape, spt, tpw, wpc, order):
    """Each thread holds exactly the elements Triton's blocked layout gives it."""
    lay = LY.blocked(shape, spt, tpw, wpc, order)
    assert lay.covers() and lay.is_disjoint()
    by_thread: dict[tuple[int, int], set] = {}
    for (r, ln, w), e in held(lay).items():
        by_thread.setdefault((ln, w), set()).add(coords_of(e, shape))
    for (ln, w), got in by_thread.items():
        lane, warp = [0] * len(shape), [0] * len(shape)
        for d in order:
            lane[d], ln = ln % tpw[d], ln // tpw[d]
            warp[d], w = w % wpc[d], w // wpc[d]
        def mine(c, lane=lane, warp=warp):
            return all((c[d] // spt[d]) % tpw[d] == lane[d]
                       and (c[d] // (spt[d] * tpw[d])) % wpc[d] == warp[d] for d in range(len(shape)))
        want = {c for c in itertools.product(*map(range, shape)) if mine(c)}
        assert got == want


def test_default_layout_is_coalesced_and_vectorised():
    lay = LY.default_blocked((1024,), 4, vec=4)
    assert lay.reg[:2] == (1, 2)  # 4 consecutive elements per thread
    assert lay.lane == (4, 8, 16, 32, 64)  # then consecutive lanes
    assert LY.contiguous_regs(lay, 0) == 4


def test_small_tile_duplicates_over_extra_threads():
    lay = LY.default_blocked((16,), 4)
    assert lay.covers() and lay.n_regs == 1
    assert lay.lane.count(0) == 1 and lay.warp == (0, 0)


def test_slice_then_broadcast_back_is_free():
    parent = LY.default_blocked((64, 128), 4, vec=4)
    for axis in (0, 1):
        sl = LY.slice_layout(parent, axis)
        src_shape = (1, 128) if axis == 0 else (64, 1)
        m = local_register_map(sl.with_shape(src_shape), parent, broadcast_view(src_shape, (64, 128)))
        assert m is not None
        # every parent register reads the sliced register holding its element's row/col
        for r, s in enumerate(m):
            c = coords_of(parent.reg_element(r), (64, 128))
            cs = coords_of(sl.with_shape(src_shape).reg_element(s), src_shape)
            assert cs == tuple(0 if src_shape[d] == 1 else c[d] for d in range(2))


def test_permute_is_a_register_renaming():
    lay = LY.default_blocked((32, 64), 4, vec=4)
    t = LY.permute_layout(lay, (1, 0))
    assert t.shape == (64, 32)
    m = local_register_map(lay, t, permute_view((32, 64), (1, 0)))
    assert m == list(range(lay.n_regs))
    for (r, ln, w), e in held(lay).items():
        c = coords_of(e, (32, 64))
        assert coords_of(t.element(r, ln, w), (64, 32)) == (c[1], c[0])


def test_different_lane_mapping_is_not_local():
    a = LY.default_blocked((32, 64), 4, vec=4)
    b = LY.default_blocked((32, 64), 4, vec=1)
    assert local_register_map(a, b) is None
    assert local_register_map(a, a) == list(range(a.n_regs))


def test_join_split_roundtrip():
    lay = LY.default_blocked((128,), 4)
    j = LY.join_layout(lay)
    half, bit = LY.split_layout(j)
    assert half == lay and bit == 0
    ready = LY.split_ready(LY.default_blocked((64, 2), 4))
    assert 1 in ready.reg


def test_scan_layouts():
    for shape, axis in (((1024,), 0), ((16, 64), 0), ((16, 64), 1), ((64, 16), 0)):
        lay = LY.scan_layout(shape, axis, 4)
        assert lay.covers() and LY.scan_ready(lay, axis)
    assert not LY.scan_ready(LY.default_blocked((1024,), 4, vec=4), 0)  # repeats along the axis


def test_solve_and_fields():
    assert solve([1, 2, 4], 6) == 0b110
    assert solve([3, 5], 6) == 0b11
    assert solve([1, 2], 4) is None
    assert dim_fields((4, 8, 2)) == [(4, 2), (1, 3), (0, 1)]
    assert flat_of(coords_of(37, (4, 8, 2)), (4, 8, 2)) == 37


def test_fma_dot_layout_covers_the_tile():
    for m, n, w in ((32, 32, 4), (64, 32, 4), (128, 128, 8), (16, 16, 1)):
        lay = LY.fma_dot_layout(m, n, w)
        assert lay.covers()
        counts = np.zeros(m * n, int)
        for (_r, _ln, _w), e in held(lay).items():
            counts[e] += 1
        assert counts.min() >= 1


def test_locate_inverts_the_layout():
    lay = LY.default_blocked((32, 64), 4, vec=4)
    for (r, ln, w), e in held(lay).items():
        assert locate(lay, e) == (r, ln, w)
    dup = LY.default_blocked((16,), 4)  # duplicated over lanes: some holder is found
    r, ln, w = locate(dup, 5)
    assert dup.element(r, ln, w) == 5


def test_compose_views():
    # transposing twice is the identity view
    there = permute_view((8, 16), (1, 0))
    back = permute_view((16, 8), (1, 0))
    both = compose(there, back)
    assert all(both(1 << i) == 1 << i for i in range(7))
