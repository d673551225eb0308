"""dot: narrow floats with an f32 accumulator, f32 with tf32 / ieee precision, f64,
int8 → int32 exactly (wrapping), batched 3-D, and the tiled matmul kernel.

Integer dots are exact everywhere. Float dots accumulate in an order that differs
between backends (numpy's float32 matmul, the GPU's and the CPU backend's chain of FMAs over k; the
interpreter's f32 `ieee`/`tf32` dot rounds the exact sum once): they are held to
`numerics_bounds.dot_bound`, and the interpreter's single rounding is checked exactly."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from interp_test_kernels import build_matmul, load, ptrs, row_major_offsets, store
from numerics_backends import chains_fmas, is_compiled, run
from numerics_bounds import assert_within, dot_bound, ulp, unit_roundoff

from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.ops import Op
from tegula.ir.types import BF16, F8E4M3, F16, F32, F64, I8, I32, PointerType, ScalarType
from tegula.ir.verifier import verify


def build_dot(a_t: ScalarType, b_t: ScalarType, acc_t: ScalarType, m: int, n: int, k: int,
              precision: str = "ieee", batch: int = 0):
    """out = acc + a @ b for one tile each (row-major buffers)."""
    lead = (batch,) if batch else ()
    kern = new_kernel("dot", [PointerType(a_t), PointerType(b_t), PointerType(acc_t), PointerType(acc_t)],
                      ["a_ptr", "b_ptr", "acc_ptr", "out_ptr"])
    a, b_, acc, out = kern.args
    bd = Builder(kern.body)
    av = load(bd, ptrs(bd, a, row_major_offsets(bd, lead + (m, k))))
    bv = load(bd, ptrs(bd, b_, row_major_offsets(bd, lead + (k, n))))
    c_offs = row_major_offsets(bd, lead + (m, n))
    cv = load(bd, ptrs(bd, acc, c_offs))
    r = bd.create(Op.DOT, [av, bv, cv], A.DotAttrs(precision)).result
    store(bd, ptrs(bd, out, c_offs), r)
    bd.create(Op.RETURN, [])
    verify(kern)
    return kern


def run_dot(kernel, a, b, acc):
    out = np.zeros_like(acc)
    run(kernel, (1,), a, b, acc, out)
    return out


def tf32_reference(x: np.ndarray) -> np.ndarray:
    """Round to 11 significant bits, ties away from zero (independent of the
    interpreter's bit trick: via frexp and float64 arithmetic)."""
    m, e = np.frexp(x.astype(np.float64))          # x = m * 2**e, 0.5 <= |m| < 1
    scaled = np.abs(m) * 2.0 ** 11
    r = np.floor(scaled + 0.5)                      # half away from zero on the magnitude
    return (np.sign(m) * r * 2.0 ** (e - 11)).astype(np.float32)


@pytest.mark.parametrize("elem", [F16, BF16, F8E4M3], ids=str)
def test_narrow_float_inputs_f32_accumulator(elem):
    rng = np.random.default_rng()
    m, n, k = 32, 16, 64
    np_t = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn}[elem.name]
    a = rng.standard_normal((m, k)).astype(np_t)
    b = rng.standard_normal((k, n)).astype(np_t)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    a_buf = a.view(np.uint8) if elem.is_fp8 else a
    b_buf = b.view(np.uint8) if elem.is_fp8 else b
    got = run_dot(build_dot(elem, elem, F32, m, n, k), a_buf, b_buf, acc)
    check_dot(got, a.astype(np.float64), b.astype(np.float64), acc, "f32")


def check_dot(got, a64, b64, acc, t: str, what: str = "dot") -> None:
    """got = acc + a @ b within the accumulation bound of k roundings in `t`."""
    exact = np.matmul(a64, b64) + acc
    terms = np.matmul(np.abs(a64), np.abs(b64)) + np.abs(acc)
    assert_within(got, exact, dot_bound(a64.shape[-1], terms, t), what)


def test_f32_ieee_is_the_exact_product_rounded_once():
    rng = np.random.default_rng()
    m, n, k = 16, 32, 64
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    got = run_dot(build_dot(F32, F32, F32, m, n, k, "ieee"), a, b, acc)
    got3 = run_dot(build_dot(F32, F32, F32, m, n, k, "tf32x3"), a, b, acc)
    if chains_fmas():  # a chain of k FMAs in f32
        check_dot(got, a.astype(np.float64), b.astype(np.float64), acc, "f32", "ieee")
        check_dot(got3, a.astype(np.float64), b.astype(np.float64), acc, "f32", "tf32x3")
        return
    np.testing.assert_array_equal(got, (a.astype(np.float64) @ b + acc).astype(np.float32))
    np.testing.assert_array_equal(got3, got)


def test_f32_tf32_rounds_inputs_to_nearest_ties_away():
    rng = np.random.default_rng()
    m, n, k = 16, 16, 32
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    # exact tf32 ties (low 13 bits = 0x1000) in a quarter of the inputs
    for arr in (a, b):
        bits = arr.view(np.uint32)
        tie = rng.random(arr.shape) < 0.25
        bits[tie] = (bits[tie] & ~np.uint32(0x1FFF)) | np.uint32(0x1000)
    acc = np.zeros((m, n), np.float32)
    got = run_dot(build_dot(F32, F32, F32, m, n, k, "tf32"), a, b, acc)
    a_tf32, b_tf32 = tf32_reference(a).astype(np.float64), tf32_reference(b).astype(np.float64)
    if chains_fmas():  # the same tf32 inputs, summed by a chain of FMAs in f32
        check_dot(got, a_tf32, b_tf32, acc, "f32", "tf32")
    else:
        np.testing.assert_array_equal(got, (a_tf32 @ b_tf32).astype(np.float32))
    ieee = run_dot(build_dot(F32, F32, F32, m, n, k, "ieee"), a, b, acc)
    assert not np.array_equal(got, ieee)  # tf32 really is less precise
    # ... by more than the accumulation bound: the inputs were rounded
    exact = a.astype(np.float64) @ b
    assert (np.abs(got - exact) > dot_bound(k, np.abs(a.astype(np.float64)) @ np.abs(b), "f32")).any()


def test_f64_dot():
    rng = np.random.default_rng()
    a, b, acc = rng.standard_normal((16, 16)), rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    got = run_dot(build_dot(F64, F64, F64, 16, 16, 16), a, b, acc)
    # the exact sums, from Fractions: float64 references would carry errors of their own
    from fractions import Fraction
    exact = np.array([[float(sum((Fraction(a[i, j]) * Fraction(b[j, c]) for j in range(16)), Fraction(acc[i, c])))
                       for c in range(16)] for i in range(16)])
    terms = np.abs(a) @ np.abs(b) + np.abs(acc)
    # half an ulp more: `exact` is the float64 nearest the exact sum
    assert_within(got, exact, dot_bound(16, terms, "f64") + ulp(exact, "f64") / 2, "f64 dot")


def test_int8_dot_is_exact_past_the_int32_range_as_the_backend_says():
    """Exact sums; one past the int32 range wraps in the interpreter and the CPU
    backend, and saturates on the CUDA backends, whose 16x16 dot runs on mma.sync
    `.satfinite` (Triton's instruction; its wgmma wraps): every k32 instruction
    clamps the sum it writes."""
    rng = np.random.default_rng()
    m, n, k = 16, 16, 64
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    acc = rng.integers(-2 ** 31, 2 ** 31, (m, n)).astype(np.int32)
    acc[0, :] = 2 ** 31 - 1  # sums past the int32 range
    got = run_dot(build_dot(I8, I8, I32, m, n, k), a, b, acc)
    exact = a.astype(np.int64) @ b.astype(np.int64) + acc
    if is_compiled():  # each k32 instruction saturates its own sum, in k order
        want = acc.astype(np.int64)
        for k0 in range(0, k, 32):
            step = a[:, k0:k0 + 32].astype(np.int64) @ b[k0:k0 + 32].astype(np.int64)
            want = np.clip(want + step, -2 ** 31, 2 ** 31 - 1)
        want = want.astype(np.int32)
    else:
        want = exact.astype(np.int32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bsz, m, n, k", [(4, 16, 16, 32), (2, 32, 8, 16), (8, 16, 32, 16)])
def test_batched_3d_dot(bsz, m, n, k):
    rng = np.random.default_rng()
    a = rng.standard_normal((bsz, m, k)).astype(np.float16)
    b = rng.standard_normal((bsz, k, n)).astype(np.float16)
    acc = rng.standard_normal((bsz, m, n)).astype(np.float32)
    got = run_dot(build_dot(F16, F16, F32, m, n, k, batch=bsz), a, b, acc)
    check_dot(got, a.astype(np.float64), b.astype(np.float64), acc, "f32")


def test_bf16_accumulator_is_rounded():
    rng = np.random.default_rng()
    a = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    acc = np.zeros((16, 16), ml_dtypes.bfloat16)
    got = run_dot(build_dot(BF16, BF16, BF16, 16, 16, 16), a, b, acc)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64
    # accumulated in f32, then rounded once to bf16: |RN(s) - s| <= u_bf16 * |s|
    acc_bound = dot_bound(16, np.abs(a64) @ np.abs(b64), "f32")
    bound = acc_bound + unit_roundoff("bf16") * (np.abs(exact) + acc_bound)
    assert_within(got.astype(np.float64), exact, bound, "bf16 dot")
    if not is_compiled():  # the interpreter rounds numpy's float32 result
        ref = torch.from_numpy(a.astype(np.float32) @ b.astype(np.float32)).to(torch.bfloat16).float().numpy()
        np.testing.assert_array_equal(got.astype(np.float32), ref)


@pytest.mark.parametrize("m,n,k", [(128, 128, 96), (100, 70, 50)])
def test_tiled_matmul_kernel_with_masks(m, n, k):
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    bm, bn, bk = 64, 64, 32
    kernel = build_matmul(m, n, k, bm, bn, bk)
    grid = ((m + bm - 1) // bm) * ((n + bn - 1) // bn)
    run(kernel, (grid,), a, b, c, m, n, k)
    check_dot(c, a.astype(np.float64), b.astype(np.float64), np.zeros((m, n)), "f32", "matmul")


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_small_k_dot(k):
    """K below a tensor-core instruction's: FMAs on the GPU, as Triton's interpreter allows."""
    rng = np.random.default_rng()
    kern = build_dot(F16, F16, F32, 32, 16, k)
    a = rng.standard_normal((32, k)).astype(np.float16)
    b = rng.standard_normal((k, 16)).astype(np.float16)
    acc = rng.standard_normal((32, 16)).astype(np.float32)
    out = run_dot(kern, a, b, acc)
    ref = acc.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
