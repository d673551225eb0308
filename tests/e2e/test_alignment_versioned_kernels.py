"""Kernels whose sizes are not specialized (`do_not_specialize`, as Inductor's dynamic
shapes are) compiled in two versions on those sizes' alignment
(`backends/cuda/alignment_versions.py`), run on every backend with sizes that take each
version: multiples of 8 (the matmul's 16-byte rows of halves), of 4 (a row of floats),
and odd ones."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl


@tegula.jit(do_not_specialize=["M", "N", "K", "stride_am", "stride_bk", "stride_cm"])
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + (rm % M)[:, None] * stride_am + kk[None, :], mask=kk[None, :] < K, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + (rn % N)[None, :], mask=kk[:, None] < K, other=0.0)
        acc += tl.dot(a, b)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16), mask=mask)


@tegula.jit(do_not_specialize=["n", "stride"])
def row_sums(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@pytest.mark.parametrize("on", ["interpreter", "cpu", "cuda-emulated", "cuda-emulated-sm90", "cuda"], indirect=True)
@pytest.mark.parametrize("M, N, K", [(40, 24, 48), (33, 24, 45), (40, 21, 48)])
def test_matmul_with_unspecialized_sizes(on, M, N, K):
    rng = np.random.default_rng()
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    c = on(np.full((M, N), np.nan, np.float16))
    grid = (tegula.cdiv(M, 32), tegula.cdiv(N, 32))
    matmul[grid](on(a), on(b), c, M, N, K, K, N, N, BM=32, BN=32, BK=16, num_warps=4, num_stages=3)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(on.back(c).astype(np.float64), want, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("on", ["interpreter", "cpu", "cuda-emulated", "cuda-emulated-sm90", "cuda"], indirect=True)
@pytest.mark.parametrize("n, stride", [(300, 304), (299, 301), (256, 258)])
def test_row_sums_with_unspecialized_lengths(on, n, stride):
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, (5, stride)).astype(np.float32)
    out = on(np.full(5, np.nan, np.float32))
    row_sums[(5,)](on(x), out, n, stride, BLOCK=128, num_warps=1)
    np.testing.assert_allclose(on.back(out), x[:, :n].astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
