"""tl.sort / tl.topk / tl.bitonic_merge / tl.flip end to end on every backend (the `on`
fixture): against numpy on random data with duplicates, both directions, 1-D and 2-D
tiles, integer and float elements, and Triton's limits."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import CompilationError


@tegula.jit
def sort_kernel(x_ptr, out_ptr, ROWS: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, ROWS)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs), descending=DESC))


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("rows, n", [(1, 2), (4, 32), (2, 128)])
@pytest.mark.parametrize("desc", [False, True])
def test_sort_matches_numpy(on, dtype, rows, n, desc):
    rng = np.random.default_rng(rows * n)
    x = (rng.integers(-20, 20, (rows, n)) if dtype is np.int32 else rng.standard_normal((rows, n))).astype(dtype)
    out = on(np.zeros_like(x))
    sort_kernel[(1,)](on(x), out, ROWS=rows, N=n, DESC=desc)
    want = np.sort(x, axis=1)
    np.testing.assert_array_equal(on.back(out), want[:, ::-1] if desc else want)


@tegula.jit
def topk_flip_kernel(x_ptr, top_ptr, flip_ptr, merged_ptr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(top_ptr + tl.arange(0, K), tl.topk(x, K))
    tl.store(flip_ptr + tl.arange(0, N), tl.flip(x))
    # ascending then descending: a bitonic sequence
    half = tl.sort(x)
    bitonic = tl.where(tl.arange(0, N) < N // 2, half, tl.flip(half))
    tl.store(merged_ptr + tl.arange(0, N), tl.bitonic_merge(bitonic))


def test_topk_flip_and_bitonic_merge(on):
    x = np.random.default_rng(9).standard_normal(64).astype(np.float32)
    top, flipped, merged = on(np.zeros(8, np.float32)), on(np.zeros(64, np.float32)), on(np.zeros(64, np.float32))
    topk_flip_kernel[(1,)](on(x), top, flipped, merged, N=64, K=8)
    np.testing.assert_array_equal(on.back(top), np.sort(x)[::-1][:8])
    np.testing.assert_array_equal(on.back(flipped), x[::-1])
    s = np.sort(x)
    np.testing.assert_array_equal(on.back(merged), np.sort(np.where(np.arange(64) < 32, s, s[::-1])))


@tegula.jit
def flip_2d_kernel(x_ptr, out_ptr, DIM: tl.constexpr):
    offs = tl.arange(0, 8)[:, None] * 16 + tl.arange(0, 16)[None, :]
    tl.store(out_ptr + offs, tl.flip(tl.load(x_ptr + offs), DIM))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_flip_any_dimension(on, dim):
    x = np.arange(128, dtype=np.int32).reshape(8, 16)
    out = on(np.zeros_like(x))
    flip_2d_kernel[(1,)](on(x), out, DIM=dim)
    np.testing.assert_array_equal(on.back(out), np.flip(x, axis=dim))


@tegula.jit
def bad_sort_kernel(x_ptr, WHAT: tl.constexpr):
    if WHAT == 0:
        tl.sort(tl.load(x_ptr + tl.arange(0, 8)[:, None] * 8 + tl.arange(0, 8)[None, :]), dim=0)
    else:
        tl.topk(tl.load(x_ptr + tl.arange(0, 8)), 16)


@pytest.mark.parametrize("what, message", [(0, "only supports the last dimension"), (1, "larger than")])
def test_limits_are_reported(what, message):
    with pytest.raises(CompilationError, match=message):
        bad_sort_kernel[(1,)](np.zeros(64, np.float32), WHAT=what)
