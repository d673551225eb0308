"""tl.gather against numpy's take_along_axis with random inputs, on the interpreter, the
compiled CPU backend, the CUDA lowering through the host emulator for sm_80 and sm_90
(and a GPU where there is one): element types from bool to f64 (16-bit and fp8 floats
moved as their bits), 1-D to 3-D tiles gathered along every axis, signed, unsigned and
narrow index types, indices outside the source (0 on every backend), 4 and 8 warps,
and a gather in a loop (its scratch rewritten every iteration)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl

BACKENDS = ["interpreter", "cpu", "cuda-emulated", "cuda-emulated-sm90", "cuda"]


@tegula.jit
def gather_nd(src_ptr, idx_ptr, out_ptr, S0: tl.constexpr, S1: tl.constexpr, S2: tl.constexpr,
              I0: tl.constexpr, I1: tl.constexpr, I2: tl.constexpr, RANK: tl.constexpr, AXIS: tl.constexpr,
              VIEW: tl.constexpr):
    raw = tl.load(src_ptr + tl.arange(0, S0 * S1 * S2))
    idx = tl.load(idx_ptr + tl.arange(0, I0 * I1 * I2))
    src = raw.to(VIEW, bitcast=True)  # bf16 / fp8 travel as their bits
    if RANK == 2:
        src = tl.reshape(src, (S0, S1))
        idx = tl.reshape(idx, (I0, I1))
    elif RANK == 3:
        src = tl.reshape(src, (S0, S1, S2))
        idx = tl.reshape(idx, (I0, I1, I2))
    out = tl.gather(src, idx, AXIS).to(raw.dtype, bitcast=True)
    tl.store(out_ptr + tl.arange(0, I0 * I1 * I2), tl.reshape(out, (I0 * I1 * I2,)))


# (numpy storage type, the tl type gathered)
TYPES = {
    "f32": (np.float32, tl.float32), "f16": (np.float16, tl.float16), "bf16": (np.uint16, tl.bfloat16),
    "f8e4": (np.uint8, tl.float8e4nv), "f64": (np.float64, tl.float64), "i8": (np.int8, tl.int8),
    "u8": (np.uint8, tl.uint8), "i64": (np.int64, tl.int64), "bool": (np.bool_, tl.int1),
}


def _random(rng, kind, dtype, shape):
    # bf16 and fp8 bits without NaN patterns: the interpreter holds those types as f32,
    # where a bitcast quiets a signalling NaN, gather or not
    if kind == "bf16":
        return (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if kind == "f8e4":
        return rng.integers(0, 0x7F, shape, dtype=np.uint8) | (rng.integers(0, 2, shape, dtype=np.uint8) << 7)
    if dtype is np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.floating):
        a = rng.standard_normal(shape).astype(dtype)
        a.flat[0], a.flat[-1] = -0.0, np.nan
        return a
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _run(on, src, idx, axis, view, num_warps=4):
    rank = src.ndim
    s = list(src.shape) + [1] * (3 - rank)
    i = list(idx.shape) + [1] * (3 - rank)
    out = on(np.zeros(idx.size, src.dtype))
    gather_nd[(1,)](on(src.reshape(-1)), on(idx.reshape(-1)), out, *s, *i, RANK=rank, AXIS=axis, VIEW=view,
                    num_warps=num_warps)
    return on.back(out).reshape(idx.shape)


def _want(src, idx, axis):
    inside = (idx >= 0) & (idx < src.shape[axis])
    got = np.take_along_axis(src, np.where(inside, idx, 0).astype(np.intp), axis)
    return np.where(inside, got, np.zeros((), src.dtype))


def _same_bits(got, want):
    if want.dtype == np.bool_:
        np.testing.assert_array_equal(got, want)
    else:
        u = f"u{want.itemsize}"
        np.testing.assert_array_equal(got.view(u), want.view(u))


@pytest.mark.parametrize("on", BACKENDS, indirect=True)
@pytest.mark.parametrize("kind", list(TYPES))
def test_gather_every_element_type(on, kind):
    rng = np.random.default_rng()
    dtype, view = TYPES[kind]
    src = _random(rng, kind, dtype, (16, 32))
    idx = rng.integers(0, 16, (64, 32)).astype(np.int32)
    _same_bits(_run(on, src, idx, 0, view), _want(src, idx, 0))


SHAPES = [  # (source shape, index shape, axis)
    ((32,), (64,), 0), ((64,), (16,), 0),
    ((8, 16), (32, 16), 0), ((8, 16), (8, 64), 1), ((32, 4), (2, 4), 0),
    ((4, 8, 16), (16, 8, 16), 0), ((4, 8, 16), (4, 2, 16), 1), ((4, 8, 16), (4, 8, 32), 2),
]


@pytest.mark.parametrize("on", BACKENDS, indirect=True)
@pytest.mark.parametrize("src_shape, idx_shape, axis", SHAPES)
@pytest.mark.parametrize("num_warps", [4, 8])
def test_gather_along_every_axis(on, src_shape, idx_shape, axis, num_warps):
    rng = np.random.default_rng()
    src = rng.standard_normal(src_shape).astype(np.float32)
    idx = rng.integers(0, src_shape[axis], idx_shape).astype(np.int32)
    _same_bits(_run(on, src, idx, axis, tl.float32, num_warps), _want(src, idx, axis))


@pytest.mark.parametrize("on", BACKENDS, indirect=True)
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64, np.int8, np.uint8, np.uint32, np.int16])
def test_gather_index_types_and_indices_outside_the_source(on, idx_dtype):
    rng = np.random.default_rng()
    src = rng.standard_normal((16, 8)).astype(np.float32)
    lo = -40 if np.issubdtype(idx_dtype, np.signedinteger) else 0
    idx = rng.integers(lo, 40, (32, 8)).astype(idx_dtype)  # about half outside [0, 16)
    if np.issubdtype(idx_dtype, np.unsignedinteger):
        idx.flat[0] = np.iinfo(idx_dtype).max  # a huge unsigned index
    else:
        idx.flat[0] = np.iinfo(idx_dtype).min
    want = _want(src, idx, 0)
    got = _run(on, src, idx, 0, tl.float32)
    _same_bits(got, want)
    assert not got[(idx < 0) | (idx >= 16)].any()


@tegula.jit
def gather_in_a_loop(src_ptr, idx_ptr, out_ptr, N: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.arange(0, N)
    acc = tl.zeros((N,), tl.float32)
    idx = tl.load(idx_ptr + offs)
    for k in range(STEPS):
        src = tl.load(src_ptr + k * N + offs)
        acc += tl.gather(src, idx, 0)
        idx = (idx + 1) % N
    tl.store(out_ptr + offs, acc)


@pytest.mark.parametrize("on", BACKENDS, indirect=True)
def test_gather_in_a_loop(on):
    rng = np.random.default_rng()
    n, steps = 256, 4
    src = rng.standard_normal((steps, n)).astype(np.float32)
    idx = rng.integers(0, n, n).astype(np.int32)
    out = on(np.zeros(n, np.float32))
    gather_in_a_loop[(1,)](on(src), on(idx), out, N=n, STEPS=steps)
    want = np.zeros(n, np.float32)
    for k in range(steps):
        want += src[k, (idx + k) % n]
    np.testing.assert_allclose(on.back(out), want, rtol=1e-6)
