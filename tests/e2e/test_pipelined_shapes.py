"""Kernels whose loops the CUDA pipeliner rewrites in the two newer ways, end to end on
every backend (the `on` fixture; on a GPU machine the "cuda" case runs them on the
hardware): a persistent softmax whose dot-free `tl.range(..., num_stages=3)` loop
prefetches its rows, and a matmul reading B as `desc.load([n, k]).T` (the transposed
tile goes into the slot). Sizes are not multiples of the blocks; references in float64."""
from __future__ import annotations

import numpy as np

import tegula
import tegula.language as tl


@tegula.jit
def persistent_softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=3):
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=mask)


def test_persistent_softmax_with_prefetched_rows(on):
    rows, cols = 203, 1000
    x = np.random.default_rng(21).standard_normal((rows, cols)).astype(np.float32)
    y = on(np.full((rows, cols), np.nan, np.float32))
    persistent_softmax[(17,)](y, on(x), cols, cols, rows, cols, BLOCK=1024, num_warps=4)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(on.back(y), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@tegula.jit
def matmul_bt_desc(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ Bt.T, Bt stored [N, K]: both operands through device-side descriptors."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(bt_ptr, [N, K], [K, 1], [BN, BK])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pm * BM, k]), b_desc.load([pn * BN, k]).T, acc)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_descriptor_matmul_with_a_transposed_operand(on):
    M, N, K = 200, 136, 328  # not multiples of the blocks; K * 2 bytes a multiple of 16
    rng = np.random.default_rng(8)
    a = rng.standard_normal((M, K)).astype(np.float16)
    bt = rng.standard_normal((N, K)).astype(np.float16)
    c = on(np.full((M, N), np.nan, np.float32))
    bm, bn, bk = 64, 64, 32
    matmul_bt_desc[((M + bm - 1) // bm, (N + bn - 1) // bn)](on(a), on(bt), c, M, N, K, BM=bm, BN=bn, BK=bk,
                                                                num_warps=4, num_stages=3)
    want = a.astype(np.float64) @ bt.astype(np.float64).T
    np.testing.assert_allclose(on.back(c), want, rtol=2e-3, atol=2e-2)
