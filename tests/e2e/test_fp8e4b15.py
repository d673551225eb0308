"""`tl.float8e4b15` (Triton's fp8 with 4 exponent bits biased by 15, 3 mantissa bits, no
infinity, NaN = S.1111.111): memory round trips, conversions from f32/f16 (nearest even,
saturating at ±1.75, NaN kept) and to f16/f32 (exact), and dots, on every backend,
against a reference built here from the format's definition."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.runtime.source import ASTSource


def _decode_table() -> np.ndarray:
    vals = np.empty(256)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            vals[code] = math.nan
        elif e == 0:
            vals[code] = sign * m / 8 * 2.0 ** -14
        else:
            vals[code] = sign * (1 + m / 8) * 2.0 ** (e - 15)
    return vals


DECODE = _decode_table()


def _encode(x: np.ndarray) -> np.ndarray:
    """Nearest value (ties to the even code), saturating, NaN → 0x7F."""
    pos = np.array([c for c in range(127)])
    out = []
    for v in x.astype(np.float64).ravel():
        if math.isnan(v):
            out.append(0x7F)
            continue
        v = max(-1.75, min(1.75, v))  # saturation, infinities too
        dist = np.abs(DECODE[pos] - abs(v))
        best = pos[dist == dist.min()]
        code = int(best[0] if len(best) == 1 else best[best % 2 == 0][0])
        out.append(code | (0x80 if math.copysign(1, v) < 0 else 0))
    return np.array(out, np.uint8).reshape(x.shape)


def test_reference_format():
    assert DECODE[0x7E] == 1.75 and DECODE[0x08] == 2.0 ** -14 and DECODE[0x01] == 2.0 ** -17
    assert tl.float8e4b15.fp_mantissa_width == 3 and tl.float8e4b15.exponent_bias == 15


@triton.jit
def _from_f32(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(tl.float8e4b15))


@triton.jit
def _to_wide(x_ptr, f16_ptr, f32_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(f16_ptr + offs, x.to(tl.float16))
    tl.store(f32_ptr + offs, x)


def test_conversions(on):
    rng = np.random.default_rng()
    x = np.concatenate([rng.standard_normal(200) * rng.choice([1e-5, 1e-3, 0.1, 1, 3], 200),
                        [0.0, -0.0, 1.75, 1.8125, 1.9, -2.5, 100.0, np.inf, -np.inf, np.nan, 2.0 ** -18,
                         3 * 2.0 ** -19, 2.0 ** -17 * 1.5, 2.0 ** -17 * 2.5]])
    x = np.resize(x, 256).astype(np.float32)
    out = on(np.zeros(256, np.uint8))
    _from_f32[(1,)](on(x), triton.reinterpret(out, tl.float8e4b15), 256)
    np.testing.assert_array_equal(on.back(out), _encode(x))

    codes = np.arange(256, dtype=np.uint8)
    f16, f32 = on(np.zeros(256, np.float16)), on(np.zeros(256, np.float32))
    _to_wide[(1,)](triton.reinterpret(on(codes), tl.float8e4b15), f16, f32, 256)
    np.testing.assert_array_equal(on.back(f32), DECODE.astype(np.float32))
    np.testing.assert_array_equal(on.back(f16), DECODE.astype(np.float16))


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def test_dot(on):
    rng = np.random.default_rng()
    finite = np.array([c for c in range(256) if not math.isnan(DECODE[c])], np.uint8)
    a, b = rng.choice(finite, (32, 32)).astype(np.uint8), rng.choice(finite, (32, 32)).astype(np.uint8)
    c = on(np.zeros((32, 32), np.float32))
    _dot[(1,)](triton.reinterpret(on(a), tl.float8e4b15), triton.reinterpret(on(b), tl.float8e4b15), c, 32, 32, 32)
    np.testing.assert_allclose(on.back(c), DECODE[a] @ DECODE[b], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cap", [80, 90])
def test_compiles_to_ptx_without_fp8_cvt(cap):
    src = ASTSource(_from_f32, {"x_ptr": "*fp32", "out_ptr": "*fp8e4b15"}, {"BLOCK": 256})
    ptx = triton.compile(src, target=GPUTarget("cuda", cap, 32)).asm["ptx"]
    assert "e4m3" not in ptx and "e5m2" not in ptx  # PTX has no e4b15 type: portable code


@triton.jit
def _dot_loop(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("cap", [80, 90])
def test_pipelined_dot_compiles_to_ptx(cap):
    sig = {"a_ptr": "*fp8e4b15", "b_ptr": "*fp8e4b15", "c_ptr": "*fp32", "K": "i32"}
    src = ASTSource(_dot_loop, sig, {"BM": 64, "BN": 64, "BK": 32})
    ptx = triton.compile(src, target=GPUTarget("cuda", cap, 32), options={"num_warps": 4}).asm["ptx"]
    assert "wgmma" not in ptx and "e4m3" not in ptx  # no tensor-core path takes e4b15 as e4m3
