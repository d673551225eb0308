"""Index tiles a loop shifts by a scalar (`passes/carried_ranges.py`), run on every
backend: FlexAttention's masked-block walk, where `offs_n` jumps through a block table
and positions the mask of a dot, and a row reduction stepping `offs += BLOCK` over a
length that is not a multiple of the block. Both read the tile after the loop too."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.ir import print_ir
from tegula.runtime.compiler import optimized_ir
from tegula.runtime.source import ASTSource


@tegula.jit
def block_walk(x_ptr, w_ptr, idx_ptr, out_ptr, last_ptr, n_blocks, BM: tl.constexpr, BN: tl.constexpr,
               D: tl.constexpr):
    """out = Σ over the table's blocks of (x · w[block]ᵀ) where key <= 4·query; last = the
    key indices after the walk (block -1's)."""
    rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    x = tl.load(x_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    kv_start = tl.load(idx_ptr) * BN
    offs_n = kv_start + rn
    kv_offset = 0
    for i in range(0, n_blocks):
        keys = kv_start + kv_offset + rn
        w = tl.load(w_ptr + keys[:, None] * D + rd[None, :])
        s = tl.dot(x, tl.trans(w))
        acc += tl.where(offs_n[None, :] <= rm[:, None] * 4, s, 0.0)
        nxt = tl.load(idx_ptr + i + 1, mask=i + 1 < n_blocks, other=-1)
        offset = (nxt - tl.load(idx_ptr + i)) * BN
        offs_n = offs_n + offset
        kv_offset += offset
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)
    tl.store(last_ptr + rn, offs_n)


BM, BN, D = 64, 32, 32


def _walk_reference(x, w, table, n):
    want = np.zeros((BM, BN))
    for blk in table[:n]:
        keys = blk * BN + np.arange(BN)
        s = x.astype(np.float64) @ w[keys].astype(np.float64).T
        want += np.where(keys[None, :] <= np.arange(BM)[:, None] * 4, s, 0.0)
    return want


@pytest.mark.parametrize("on", ["interpreter", "cpu", "cuda-emulated", "cuda-emulated-sm90", "cuda"], indirect=True)
def test_block_walk_masks_with_the_rebuilt_offsets(on):
    rng = np.random.default_rng()
    x = rng.integers(-2, 3, (BM, D)).astype(np.float16)
    w = rng.integers(-2, 3, (12 * BN, D)).astype(np.float16)
    table = np.array([0, 3, 4, 9, 11], np.int32)
    for n in (len(table), 2, 1):  # fewer blocks than stages too
        out = on(np.full((BM, BN), np.nan, np.float32))
        last = on(np.zeros(BN, np.int32))
        block_walk[(1,)](on(x), on(w), on(table), out, last, n, BM=BM, BN=BN, D=D, num_warps=4, num_stages=3)
        np.testing.assert_array_equal(on.back(out), _walk_reference(x, w, table, n))
        np.testing.assert_array_equal(on.back(last), -BN + np.arange(BN))


def test_the_walks_mask_reads_its_offsets_without_moving_them_between_layouts():
    # carried as a tile, offs_n kept the loads' layout and went through shared memory
    # each iteration to reach the dot's, where the mask reads it
    src = ASTSource(block_walk, {"x_ptr": "*fp16", "w_ptr": "*fp16", "idx_ptr": "*i32", "out_ptr": "*fp32",
                                 "last_ptr": "*i32", "n_blocks": "i32", "BM": "constexpr", "BN": "constexpr",
                                 "D": "constexpr"},
                    {"BM": BM, "BN": BN, "D": D}, {"x_ptr": 16, "w_ptr": 16, "idx_ptr": 16, "out_ptr": 16})
    kernel = optimized_ir(src)
    carried = re.search(r"= for [^\n]* -> ([^\n]*) \{", print_ir(kernel)).group(1)
    assert "xi32>" not in carried, carried  # offs_n is carried as its scalar
    for capability in (80, 90):
        tgir = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, capability)[0]["tgir"]
        body = tgir[tgir.index("= for"):tgir.index("\n  }\n", tgir.index("= for"))]
        assert "convert_layout" not in body, (capability, body)


@tegula.jit
def strided_row_sums(x_ptr, out_ptr, last_ptr, n, start, BLOCK: tl.constexpr):
    """out[r] = Σ x[r, start:n], stepping BLOCK columns at a time; last = the offsets after."""
    row = tl.program_id(0)
    offs = start + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for _ in range(start, n, BLOCK):
        acc += tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
        offs += BLOCK
    tl.store(out_ptr + row, tl.sum(acc, 0))
    tl.store(last_ptr + row * BLOCK + tl.arange(0, BLOCK), offs)


def test_strided_row_sums_over_a_ragged_length(on):
    rng = np.random.default_rng()
    rows, n, start, block = 3, 1000, 5, 128
    x = rng.standard_normal((rows, n)).astype(np.float32)
    out = on(np.full(rows, np.nan, np.float32))
    last = on(np.zeros((rows, block), np.int32))
    strided_row_sums[(rows,)](on(x), out, last, n, start, BLOCK=block)
    np.testing.assert_allclose(on.back(out), x[:, start:].astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
    steps = len(range(start, n, block))
    np.testing.assert_array_equal(on.back(last), np.broadcast_to(start + steps * block + np.arange(block),
                                                                 (rows, block)))
