"""Casts and bitcasts: bf16 round-to-nearest-even (against torch), fp8 (against
ml_dtypes), float → int saturation, round-toward-zero casts, bit-pattern bitcasts,
scalar argument coercion."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from interp_test_kernels import build_map_kernel, load, ptrs, store, tile
from numerics_backends import run

from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.ops import Op
from tegula.ir.types import BF16, F8E4M3, F8E5M2, F16, F32, F64, I1, I8, I16, I32, I64, U32, PointerType
from tegula.ir.verifier import verify

N = 128


def bf16_bits_torch(x32: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.ascontiguousarray(x32)).to(torch.bfloat16).view(torch.int16).numpy()


def random_f32_with_ties(rng, n: int = N) -> np.ndarray:
    """Random float32 over a wide exponent range, a quarter of them exact bf16 ties."""
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-60, 60, n))).astype(np.float32)
    bits = x.view(np.uint32).copy()
    tie = rng.random(n) < 0.25
    bits[tie] = (bits[tie] & 0xFFFF0000) | 0x8000
    return bits.view(np.float32)


def cast_kernel(src, dst, rounding="rtne"):
    return build_map_kernel(Op.CAST, [src], dst, attrs=A.CastAttrs(rounding))


def test_f32_to_bf16_rounds_to_nearest_even_like_torch():
    rng = np.random.default_rng()
    x = random_f32_with_ties(rng)
    out = np.zeros(N, np.int16)  # a bf16 pointer given an int16 array: bytes are bytes
    run(cast_kernel(F32, BF16), (1,), x, out)
    np.testing.assert_array_equal(out, bf16_bits_torch(x))


def test_bf16_arithmetic_rounds_every_result():
    rng = np.random.default_rng()
    a = torch.from_numpy(rng.standard_normal(N).astype(np.float32)).to(torch.bfloat16)
    b = torch.from_numpy(rng.standard_normal(N).astype(np.float32) * 1e-2).to(torch.bfloat16)
    out = torch.zeros(N, dtype=torch.bfloat16)
    # torch CPU tensors (bf16 included) are accepted as pointer arguments
    run(build_map_kernel(Op.ADD, [BF16, BF16], BF16), (1,), a, b, out)
    assert torch.equal(out, a + b)


def test_bf16_pointer_accepts_ml_dtypes_arrays():
    rng = np.random.default_rng()
    a = rng.standard_normal(N).astype(ml_dtypes.bfloat16)
    out = np.zeros(N, np.float32)
    run(cast_kernel(BF16, F32), (1,), a, out)
    np.testing.assert_array_equal(out, a.astype(np.float32))


def test_f64_to_bf16_rounds_once():
    # 2**24 * (1 + 85/128 + 2**-8 + 2**-30): just above a bf16 tie. Through float32 the
    # tail is lost, the value becomes an exact tie and rounds to even (down); rounded
    # once it must go up.
    v = 2.0 ** 24 * (1 + 85 / 128 + 2 ** -8 + 2 ** -30)
    x = np.array([v, -v] * (N // 2))
    out = np.zeros(N, np.uint16)
    run(cast_kernel(F64, BF16), (1,), x, out)
    got = (out.astype(np.uint32) << 16).view(np.float32)
    assert got[0] == 2.0 ** 24 * (1 + 86 / 128) and got[1] == -got[0]


@pytest.mark.parametrize("t,ml", [(F8E4M3, ml_dtypes.float8_e4m3fn), (F8E5M2, ml_dtypes.float8_e5m2)],
                         ids=["e4m3", "e5m2"])
def test_f32_to_fp8_matches_ml_dtypes(t, ml):
    rng = np.random.default_rng()
    limit = float(ml_dtypes.finfo(ml).max)
    x = (rng.uniform(-1, 1, N) * np.exp2(rng.integers(-12, 9, N))).astype(np.float32)
    x = np.clip(x, -limit, limit)
    # exact ties between neighbouring finite fp8 values (below the largest: 0x7E in
    # e4m3, 0x7B in e5m2, whose next codes are NaN and inf)
    codes = rng.integers(0, 0x7E if t.name == "f8e4m3" else 0x7B, 16).astype(np.uint8)
    lo = codes.view(ml).astype(np.float32)
    hi = (codes + 1).view(ml).astype(np.float32)
    x[:16] = ((lo.astype(np.float64) + hi) / 2).astype(np.float32)
    out = np.zeros(N, np.uint8)  # fp8 pointers take uint8 arrays
    run(cast_kernel(F32, t), (1,), x, out)
    np.testing.assert_array_equal(out, x.astype(ml).view(np.uint8))


@pytest.mark.parametrize("t,ml", [(F8E4M3, ml_dtypes.float8_e4m3fn), (F8E5M2, ml_dtypes.float8_e5m2)],
                         ids=["e4m3", "e5m2"])
def test_fp8_to_f32_decodes_every_code(t, ml):
    codes = np.arange(256, dtype=np.uint8)
    rng = np.random.default_rng()
    perm = rng.permutation(256)[:N].astype(np.uint8)
    out = np.zeros(N, np.float32)
    run(cast_kernel(t, F32), (1,), codes[perm], out)
    np.testing.assert_array_equal(out, codes[perm].view(ml).astype(np.float32))  # NaN == NaN here


def test_e4m3_saturates_like_satfinite():
    x = np.random.default_rng().uniform(500, 1e6, N).astype(np.float32)
    x[::2] *= -1
    out = np.zeros(N, np.uint8)
    run(cast_kernel(F32, F8E4M3), (1,), x, out)
    np.testing.assert_array_equal(out, np.where(x > 0, 0x7E, 0xFE))


@pytest.mark.parametrize("src", [F32, F16, BF16], ids=str)
def test_e5m2_saturates_like_satfinite(src):
    """Triton 3.6 converts f32, f16 and bf16 to e5m2 with `cvt.rn.satfinite` on sm_90:
    values past the largest finite one (57344) and infinities become ±57344, never
    ±inf; NaN stays NaN. Below the overflow, rounding is to nearest even."""
    rng = np.random.default_rng()
    x = rng.uniform(61440, 65504 if src.name == "f16" else 1e9, N).astype(np.float32)
    x[:8] = [np.inf, -np.inf, np.nan, 57344.0, 61439.0, -61441.0, 1.5, -2.0 ** -16]
    x[8::2] *= -1
    if src.name == "bf16":
        buf = bf16_bits_torch(x).view(np.uint16)
        x = (buf.astype(np.uint32) << 16).view(np.float32)  # the values the kernel sees
    elif src.name == "f16":
        buf = x.astype(np.float16)
        x = buf.astype(np.float32)
    else:
        buf = x
    out = np.zeros(N, np.uint8)
    run(cast_kernel(src, F8E5M2), (1,), buf, out)
    big = np.abs(x) > 57344
    assert big.sum() > N // 2
    np.testing.assert_array_equal(out[big], np.where(x[big] > 0, 0x7B, 0xFB))
    small = ~big & ~np.isnan(x)
    np.testing.assert_array_equal(out[small], x[small].astype(ml_dtypes.float8_e5m2).view(np.uint8))
    assert (out[np.isnan(x)] & 0x7F > 0x7C).all()


def test_e5m2_infinity_survives_load_and_store():
    """Saturation is a property of rounding: an e5m2 infinity read from memory is
    stored back as one (and widens to inf)."""
    codes = np.random.default_rng().integers(0, 256, N).astype(np.uint8)
    codes[:4] = [0x7C, 0xFC, 0x7B, 0xFB]
    codes[(codes & 0x7F) > 0x7C] = 0x3C  # NaN payloads need not survive
    k = new_kernel("copy8", [PointerType(F8E5M2), PointerType(F8E5M2), PointerType(F32)], ["x", "y", "w"])
    bd = Builder(k.body)
    offs = bd.op1(Op.ARANGE, attrs=A.RangeAttrs(0, N))
    v = load(bd, ptrs(bd, k.args[0], offs))
    store(bd, ptrs(bd, k.args[1], offs), v)
    store(bd, ptrs(bd, k.args[2], offs), bd.op1(Op.CAST, v, attrs=A.CastAttrs(), type=tile(F32, N)))
    bd.create(Op.RETURN, [])
    verify(k)
    y, w = np.zeros(N, np.uint8), np.zeros(N, np.float32)
    run(k, (1,), codes, y, w)
    np.testing.assert_array_equal(y, codes)
    np.testing.assert_array_equal(w, codes.view(ml_dtypes.float8_e5m2).astype(np.float32))
    assert w[0] == np.inf and w[1] == -np.inf


def test_float_to_int_truncates_saturates_and_maps_nan_to_zero():
    rng = np.random.default_rng()
    x = (rng.standard_normal(N) * 1e3).astype(np.float32)
    x[:4] = [np.nan, 1e20, -1e20, np.inf]
    out = np.zeros(N, np.int8)
    run(cast_kernel(F32, I8), (1,), x, out)
    ref = np.clip(np.trunc(np.nan_to_num(x, nan=0.0, posinf=1e9, neginf=-1e9)), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(out, ref)


def test_integer_casts_wrap_and_extend():
    rng = np.random.default_rng()
    x = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    out8 = np.zeros(N, np.int8)
    run(cast_kernel(I32, I8), (1,), x, out8)
    np.testing.assert_array_equal(out8, x.astype(np.int8))
    out64 = np.zeros(N, np.int64)
    run(cast_kernel(I32, I64), (1,), x, out64)
    np.testing.assert_array_equal(out64, x.astype(np.int64))            # sign-extends
    u = x.view(np.uint32)
    run(cast_kernel(U32, I64), (1,), u, out64)
    np.testing.assert_array_equal(out64, u.astype(np.int64))            # zero-extends
    b = np.zeros(N, np.uint8)  # i1 memory is one byte
    run(cast_kernel(I32, I1), (1,), x, b)
    np.testing.assert_array_equal(b, (x != 0).astype(np.uint8))


@pytest.mark.parametrize("dst", [BF16, F16], ids=str)
def test_rtz_cast_rounds_toward_zero(dst):
    rng = np.random.default_rng()
    x = random_f32_with_ties(rng)
    x = x[np.abs(x) < 60000]
    x = np.resize(x, N).astype(np.float32)
    out = np.zeros(N, np.uint16)
    run(cast_kernel(F32, dst, "rtz"), (1,), x, out)
    if dst.name == "bf16":
        np.testing.assert_array_equal(out, (x.view(np.uint32) >> 16).astype(np.uint16))  # truncation
    else:
        got = out.view(np.float16).astype(np.float64)
        assert np.all(np.abs(got) <= np.abs(x.astype(np.float64)))
        rne = x.astype(np.float16)
        assert np.all((got == rne) | (np.abs(got) < np.abs(rne.astype(np.float64))))


@pytest.mark.parametrize("src,dst,np_src,np_dst", [
    (BF16, I16, np.uint16, np.int16), (I16, BF16, np.int16, np.uint16),
    (F32, I32, np.float32, np.int32), (I32, F32, np.int32, np.float32),
    (F16, I16, np.float16, np.int16), (F64, I64, np.float64, np.int64),
    (F8E5M2, I8, np.uint8, np.int8), (I8, F8E4M3, np.int8, np.uint8),
], ids=["bf16-i16", "i16-bf16", "f32-i32", "i32-f32", "f16-i16", "f64-i64", "e5m2-i8", "i8-e4m3"])
def test_bitcast_moves_bit_patterns(src, dst, np_src, np_dst):
    rng = np.random.default_rng()
    x = rng.integers(0, 256, N * np.dtype(np_src).itemsize, dtype=np.uint8).view(np_src).copy()
    # NaN payloads need not survive a float round trip: keep the float sides finite.
    if np.dtype(np_src).kind == "f":
        x[~np.isfinite(x)] = 1.5
    if src.name == "bf16" or dst.name == "bf16":
        u = x.view(np.uint16)
        u[(u & 0x7F80) == 0x7F80] = 0x3F80
    if src.name == "f8e5m2" or dst.name == "f8e4m3":
        u = x.view(np.uint8)
        u[(u & 0x7C) == 0x7C if src.name == "f8e5m2" else (u & 0x7F) == 0x7F] = 0x38
    out = np.zeros(N, np_dst)
    run(build_map_kernel(Op.BITCAST, [src], dst), (1,), x, out)
    np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))


def test_scalar_arguments_are_coerced_with_wrapping_and_rounding():
    k = new_kernel("scalars", [PointerType(I32), PointerType(U32), PointerType(BF16), I32, U32, BF16],
                   ["o1", "o2", "o3", "a", "b", "c"])
    o1, o2, o3, a, b, c = k.args
    bd = Builder(k.body)
    offs = bd.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 2))
    for ptr, v in ((o1, a), (o2, b), (o3, c)):
        store(bd, ptrs(bd, ptr, offs), bd.splat(v, (2,)))
    bd.create(Op.RETURN, [])
    verify(k)
    r1, r2, r3 = np.zeros(2, np.int32), np.zeros(2, np.uint32), np.zeros(2, np.uint16)
    x = float(np.random.default_rng().uniform(1, 2))
    run(k, (1,), r1, r2, r3, 2 ** 32 + 5, -1, x)
    assert r1[0] == 5 and r2[0] == 2 ** 32 - 1
    assert r3[0] == torch.tensor(x, dtype=torch.float64).to(torch.bfloat16).view(torch.int16).item() & 0xFFFF


def test_load_bf16_store_f32_roundtrip_of_random_bits():
    rng = np.random.default_rng()
    bits = rng.integers(0, 2 ** 16, N).astype(np.uint16)
    out = np.zeros(N, np.float32)
    run(cast_kernel(BF16, F32), (1,), bits, out)
    finite = np.isfinite(out)
    np.testing.assert_array_equal(out[finite].view(np.uint32) >> 16, bits[finite])
    k = new_kernel("copy", [PointerType(BF16), PointerType(BF16)], ["x", "y"])
    bd = Builder(k.body)
    offs = bd.op1(Op.ARANGE, attrs=A.RangeAttrs(0, N))
    store(bd, ptrs(bd, k.args[1], offs), load(bd, ptrs(bd, k.args[0], offs)))
    bd.create(Op.RETURN, [])
    y = np.zeros(N, np.uint16)
    run(k, (1,), bits, y)
    np.testing.assert_array_equal(y[finite], bits[finite])
