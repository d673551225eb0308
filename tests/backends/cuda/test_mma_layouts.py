"""The tensor-core layouts against the PTX ISA's fragment tables, written out element by
element (an independent statement of the same facts), for every lane and register."""
import itertools

import pytest

from tegula.backends.cuda.linear_layout import coords_of, local_register_map
from tegula.backends.cuda.mma_layouts import (
    mma_v2_accumulator,
    mma_v2_operand,
    mma_v3_accumulator,
    wgmma_register_a,
)


def owners(layout):
    """{(warp, lane): [coords held by register 0, 1, ...]}"""
    out = {}
    for w, l in itertools.product(range(layout.num_warps), range(32)):
        out[w, l] = [coords_of(layout.element(r, l, w), layout.shape) for r in range(layout.n_regs)]
    return out


# --- PTX fragment tables for one instruction (one warp), as (row, col) per fragment index

def acc_fragment(lane):  # mma m16n8, c0..c3
    g, q = lane >> 2, lane & 3
    return [(g + 8 * (i >= 2), 2 * q + (i & 1)) for i in range(4)]


def a_fragment(lane, k_width):  # (row, k) per element, in PTX order
    g, q = lane >> 2, lane & 3
    if k_width == 1:  # tf32 m16n8k8: a0..a3
        return [(g + 8 * (i & 1), q + 4 * (i >> 1)) for i in range(4)]
    if k_width == 2:  # f16 m16n8k16: a0..a7
        return [(g + 8 * ((i >> 1) & 1), 2 * q + (i & 1) + 8 * (i >> 2)) for i in range(8)]
    # 8-bit m16n8k32: a0..a15
    return [(g + 8 * ((i >> 2) & 1), 4 * q + (i & 3) + 16 * (i >> 3)) for i in range(16)]


def b_fragment(lane, k_width):  # (k, col)
    g, q = lane >> 2, lane & 3
    if k_width == 1:
        return [(q + 4 * i, g) for i in range(2)]
    if k_width == 2:
        return [(2 * q + (i & 1) + 8 * (i >> 1), g) for i in range(4)]
    return [(4 * q + (i & 3) + 16 * (i >> 2), g) for i in range(8)]


def test_single_warp_accumulator_matches_ptx():
    lay = mma_v2_accumulator((16, 8), (1, 1))
    got = owners(lay)
    for lane in range(32):
        assert got[0, lane] == acc_fragment(lane)


@pytest.mark.parametrize("k_width,k", [(1, 8), (2, 16), (4, 32)])
def test_single_instruction_operands_match_ptx(k_width, k):
    a = owners(mma_v2_operand(0, (16, k), (1, 1), k_width))
    b = owners(mma_v2_operand(1, (k, 8), (1, 1), k_width))
    for lane in range(32):
        assert a[0, lane] == a_fragment(lane, k_width)
        assert b[0, lane] == b_fragment(lane, k_width)


@pytest.mark.parametrize("shape,warps", [((128, 256), (2, 4)), ((64, 64), (4, 1)), ((32, 128), (1, 4)),
                                         ((16, 16), (2, 2))])
def test_tiled_accumulator_covers_each_element_by_its_instruction(shape, warps):
    lay = mma_v2_accumulator(shape, warps)
    m, n = shape
    wm, wn = warps
    seen = {}
    for (w, lane), elems in owners(lay).items():
        wm_i, wn_i = w // wn, w % wn
        for r, (row, col) in enumerate(elems):
            # the element sits in one m16n8 instruction tile at this lane's fragment slot
            frag = acc_fragment(lane)[r & 3]
            assert (row % 16, col % 8) == frag
            if m >= 16 * wm:
                assert (row // 16) % wm == wm_i
            if n >= 8 * wn:
                assert (col // 8) % wn == wn_i
            seen.setdefault((row, col), set()).add((w, lane))
    assert len(seen) == m * n


def test_wgmma_accumulator_matches_ptx():
    # m64nN per warpgroup: warp w of the group holds rows 16w..16w+15; d[i] at
    # row 16w + g + 8*((i>>1)&1), col 8*(i>>2) + 2q + (i&1)
    n = 64
    lay = mma_v3_accumulator((64, n), (4, 1))
    got = owners(lay)
    for w, lane in itertools.product(range(4), range(32)):
        g, q = lane >> 2, lane & 3
        want = [(16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * q + (i & 1)) for i in range(n // 2)]
        assert got[w, lane] == want


def test_wgmma_two_warpgroups_along_n():
    lay = mma_v3_accumulator((64, 256), (4, 2))
    got = owners(lay)
    for w in range(8):
        cols = {c for _r, c in got[w, 0]}
        assert min(cols) // 128 == w // 4


def test_attention_p_feeds_next_dot_as_register_renaming():
    # the accumulator of the first dot (rows x keys) and the A operand of the second
    # (rows x keys as K) hold the same elements in every thread
    for warps in [(4, 1), (8, 1)]:
        acc = mma_v2_accumulator((128, 64), warps)
        a = mma_v2_operand(0, (128, 64), warps, 2)
        assert local_register_map(acc, a) is not None
        acc3 = mma_v3_accumulator((128, 64), warps)
        a3 = wgmma_register_a((128, 64), warps, 2)
        assert local_register_map(acc3, a3) is not None


def test_operand_warps_across_other_dim_hold_copies():
    a = mma_v2_operand(0, (64, 32), (2, 2), 2)
    b = mma_v2_operand(1, (32, 64), (2, 2), 2)
    # warp index = wm_i * wn + wn_i: A is the same for wn_i 0/1, B the same for wm_i 0/1
    oa, ob = owners(a), owners(b)
    for lane in range(32):
        assert oa[0, lane] == oa[1, lane] and oa[2, lane] == oa[3, lane] != oa[0, lane]
        assert ob[0, lane] == ob[2, lane] and ob[1, lane] == ob[3, lane] != ob[0, lane]


def test_bad_shapes_are_errors():
    with pytest.raises(ValueError, match="2-D"):
        mma_v2_accumulator((16, 8, 2), (1, 1))
    with pytest.raises(ValueError, match="multiples of 4"):
        mma_v3_accumulator((64, 64), (2, 1))
    with pytest.raises(ValueError, match="k_width"):
        mma_v2_operand(0, (16, 16), (1, 1), 3)
