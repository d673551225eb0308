"""tl.gather and tl.histogram end to end on every backend (the `on` fixture), against
numpy: gathers along each axis of a 2-D tile with repeated and permuted indices (floats
bit for bit, -0.0 and NaN included; ints; bools), and histograms with a mask and values
outside the bins (test_gather.py has the gather's random cases per element type, rank and
index type)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import CompilationError


@tegula.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, IR: tl.constexpr,
                  IC: tl.constexpr, AXIS: tl.constexpr):
    src = tl.load(src_ptr + tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :])
    ioffs = tl.arange(0, IR)[:, None] * IC + tl.arange(0, IC)[None, :]
    tl.store(out_ptr + ioffs, tl.gather(src, tl.load(idx_ptr + ioffs), AXIS))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.bool_])
@pytest.mark.parametrize("axis", [0, 1])
def test_gather_along_each_axis(on, dtype, axis):
    rng = np.random.default_rng(11)
    r, c = 8, 16
    if dtype is np.bool_:
        src = rng.random((r, c)) < 0.5
    elif dtype is np.int64:
        src = rng.integers(-2**40, 2**40, (r, c))
    else:
        src = rng.standard_normal((r, c)).astype(dtype)
    if dtype in (np.float32, np.float16):
        src[0, 0], src[1, 1] = -0.0, np.nan
    ir, ic = (16, c) if axis == 0 else (r, 32)  # the index may be longer than the source along `axis`
    idx = rng.integers(0, src.shape[axis], (ir, ic)).astype(np.int32)
    idx[0, :] = 0  # repeated picks, including the -0.0 / NaN row
    out = on(np.zeros((ir, ic), src.dtype))
    gather_kernel[(1,)](on(src), on(idx), out, R=r, C=c, IR=ir, IC=ic, AXIS=axis)
    want = np.take_along_axis(src, idx, axis)
    np.testing.assert_array_equal(on.back(out).view(f"u{src.itemsize}"), want.view(f"u{src.itemsize}"))


def test_gather_of_triton_s_large_shape_on_the_interpreter(monkeypatch):
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    gather_kernel.clear_cache()
    rng = np.random.default_rng()
    src = rng.standard_normal((128, 64)).astype(np.float32)
    idx = rng.integers(0, 128, (256, 64)).astype(np.int32)
    out = np.zeros((256, 64), np.float32)
    gather_kernel[(1,)](src, idx, out, R=128, C=64, IR=256, IC=64, AXIS=0)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx, 0))


@tegula.jit
def histogram_kernel(x_ptr, out_ptr, n, N: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + tl.arange(0, BINS), tl.histogram(x, BINS, mask=offs < n))


def test_histogram_with_mask_and_values_outside_the_bins(on):
    x = np.random.default_rng(12).integers(-3, 20, 256).astype(np.int32)
    out = on(np.zeros(16, np.int32))
    histogram_kernel[(1,)](on(x), out, 200, N=256, BINS=16)
    kept = x[:200]
    np.testing.assert_array_equal(on.back(out), np.bincount(kept[(kept >= 0) & (kept < 16)], minlength=16))


@tegula.jit
def bad_gather_kernel(x_ptr, WHAT: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, 16))
    if WHAT == 0:
        tl.gather(v, v, 0)
    else:
        tl.histogram(v, 8)


@pytest.mark.parametrize("what, message", [(0, "index must be an integer"), (1, "only supports integer")])
def test_type_errors(what, message):
    with pytest.raises(CompilationError, match=message):
        bad_gather_kernel[(1,)](np.zeros(16, np.float32), WHAT=what)
