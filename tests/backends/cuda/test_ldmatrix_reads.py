"""Which layouts `ldmatrix_reads.ldmatrix_rows` reads with `ldmatrix`: those holding
the instruction's fragments (16-bit accumulators of mma.sync and wgmma, the mma.sync
operands), with rows 16-byte aligned in memory; and the row addresses it derives,
checked against the fragment each lane must receive. The emulator runs the reads in
the kernels of test_layout_choices (a ring slot read back into an accumulator's layout)
and wherever a conversion through scratch lands in such a layout."""
from __future__ import annotations

import pytest

from tegula.backends.cuda import layouts as LY
from tegula.backends.cuda.ldmatrix_reads import ldmatrix_rows
from tegula.backends.cuda.mma_layouts import mma_v2_accumulator, mma_v2_operand, mma_v3_accumulator


def _rows_read(lay, rows, count):
    """{(lane, register): flat index} the instruction delivers, from the row addresses:
    lane l gets, of matrix j, row l // 4 at elements 2 (l % 4) and the next."""
    got = {}
    for g in range(rows.n_regs):
        for lane in range(32):
            for j in range(count):
                # the address lane 8 j + l // 4 supplies: its lane bits over `rows`
                addr_lane = 8 * j + lane // 4
                flat = rows.reg_element(g)
                for bit in range(5):
                    if addr_lane >> bit & 1:
                        flat ^= rows.lane[bit]
                for e in range(2):
                    got[(lane, (g * count + j) * 2 + e)] = flat + 2 * (lane % 4) + e
    return got


def _held(lay):
    out = {}
    for lane in range(32):
        for r in range(lay.n_regs):
            flat = lay.reg_element(r)
            for bit in range(5):
                if lane >> bit & 1:
                    flat ^= lay.lane[bit]
            out[(lane, r)] = flat
    return out


@pytest.mark.parametrize("lay", [
    mma_v2_accumulator((64, 64), (4, 1)),
    mma_v2_accumulator((32, 64), (1, 2)),
    mma_v3_accumulator((64, 128), (4, 1)),
    mma_v2_operand(0, (64, 32), (4, 1), 2),
    mma_v2_operand(1, (32, 64), (4, 1), 2).map_bases(lambda b: b, (32, 64)),
], ids=["mma-acc", "mma-acc-2warps", "wgmma-acc", "mma-a", "mma-b"])
def test_fragment_layouts_are_read_by_ldmatrix(lay):
    plan = ldmatrix_rows(lay)
    if lay.reg[0] != 1:  # a B operand holds pairs along K, across rows: not this read
        assert plan is None
        return
    rows, count = plan
    assert count == 4
    held = _held(lay)
    for (lane, r), flat in _rows_read(lay, rows, count).items():
        assert held[(lane, r)] == flat, (lane, r)


def test_other_layouts_are_not():
    assert ldmatrix_rows(LY.default_blocked((64, 64), 4)) is None
    # rows not 16-byte aligned where they start (a pad of 2 elements)
    acc = mma_v2_accumulator((64, 64), (4, 1))
    assert ldmatrix_rows(acc, lambda b: b if b < 64 else (b >> 6) * 66) is None
    assert ldmatrix_rows(acc, lambda b: b if b < 64 else (b >> 6) * 72) is not None
