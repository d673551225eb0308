"""TMA for tensor-descriptor matmuls on sm_90a, run on the host emulator (its models of
`cp.async.bulk.tensor`, the mbarriers and wgmma) and compared with the interpreter
and float64 numpy: device-side descriptors and host `TensorDescriptor` arguments,
fp16 and bf16, B stored [K, N] or [N, K] (read through `.T`), fp8 whose blocks run
along K (an 8-bit B stored [K, N] is staged and transposed instead), one or two TMA boxes per
block row, sizes that are not multiples of the block (the boxes' out-of-bounds parts
zero-filled, or NaN-filled for a "nan" descriptor). Also: which descriptors TMA takes
(the pointer path keeps the rest), and the PTX ptxas assembles for sm_90a."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.ir.core import ArgAttrs
from tegula.ir.numpy_ops import bf16_bits_to_f32, f32_to_bf16_bits
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def desc_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                B_NK: tl.constexpr, PAD: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK], padding_option=PAD)
    if B_NK:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BN, BK])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([pm * BM, k])
        if B_NK:
            b = b_desc.load([pn * BN, k]).T
        else:
            b = b_desc.load([k, pn * BN])
        acc = tl.dot(a, b, acc)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tegula.jit
def host_desc_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Tutorial 09's shape: host descriptors, B given as [N, K] and read through `.T`."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pm * BM, k]), b_desc.load([pn * BN, k]).T, acc)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


SIG = {"a_ptr": "*{t}", "b_ptr": "*{t}", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr",
       "BN": "constexpr", "BK": "constexpr", "B_NK": "constexpr", "PAD": "constexpr"}


def _inputs(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(np.float32)
    if dtype == "bf16":
        bits = f32_to_bf16_bits(x)
        return bits, bf16_bits_to_f32(bits).astype(np.float64)
    x16 = x.astype(np.float16)
    return x16, x16.astype(np.float64)


def _ir(fn, sig, cx, attrs):
    return optimized_ir(ASTSource(fn, signature=sig, constexprs=cx, attrs=attrs))


def _device_kernel(dtype, bm, bn, bk, b_nk, pad="zero", k_div=8):
    sig = {k: v.format(t=dtype) for k, v in SIG.items()}
    # the sizes' divisors exact, as a launch measures them (no alignment version)
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, **{n: ArgAttrs(d, exact_divisibility=True)
                                                        for n, d in (("M", 8), ("N", 8), ("K", k_div))}}
    return _ir(desc_matmul, sig, {"BM": bm, "BN": bn, "BK": bk, "B_NK": b_nk, "PAD": pad}, attrs)


def _tgir_ops(ek):
    return [i.op for i in ek.lowering.kernel.walk()]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("b_nk", [False, True], ids=["b_kn", "b_nk"])
@pytest.mark.parametrize("bm, bn, bk", [(64, 64, 32), (64, 128, 64)])
def test_device_descriptor_matmul_runs_on_tma(dtype, b_nk, bm, bn, bk):
    M, N, K = 120, 136, 104
    kernel = _device_kernel(dtype, bm, bn, bk, b_nk)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    ops = _tgir_ops(ek)
    assert Op.TMA_LOAD in ops and Op.ASYNC_COPY not in ops and Op.MBARRIER_WAIT in ops
    assert [c.version for c in ek.plan.mma.values()] == [3]
    rng = np.random.default_rng(bm + bn + bk + b_nk)
    a, a64 = _inputs(rng, (M, K), dtype)
    b, b64 = _inputs(rng, (N, K) if b_nk else (K, N), dtype)
    grid = ((M + bm - 1) // bm, (N + bn - 1) // bn, 1)
    c = np.full((M, N), np.nan, np.float32)
    ek.run(grid, [a, b, c, M, N, K])
    ref = np.full((M, N), np.nan, np.float32)
    execute(kernel, grid, [a, b, ref, M, N, K])
    want = a64 @ (b64.T if b_nk else b64)
    np.testing.assert_allclose(c, want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(c, ref, rtol=2e-3, atol=2e-3)


def test_nan_padding_reaches_the_dot():
    """K not a multiple of BK: the last box reads past K, which a "nan" descriptor fills
    with NaN (TMA's NaN-request fill), as the interpreter does."""
    M, N, K = 64, 64, 40
    kernel = _device_kernel("fp16", 64, 64, 32, False, pad="nan")
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=2)
    assert Op.TMA_LOAD in _tgir_ops(ek)
    rng = np.random.default_rng(3)
    a, _ = _inputs(rng, (M, K), "fp16")
    b, _ = _inputs(rng, (K, N), "fp16")
    c = np.zeros((M, N), np.float32)
    ek.run((1, 1, 1), [a, b, c, M, N, K])
    ref = np.zeros((M, N), np.float32)
    execute(kernel, (1, 1, 1), [a, b, ref, M, N, K])
    assert np.isnan(ref).all() and np.isnan(c).all()


def test_host_tensor_descriptors_run_on_tma():
    M, N, K, bm, bn, bk = 100, 72, 136, 64, 64, 64
    sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bn}, {bk}]>", "c_ptr": "*fp32",
           "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    # what the runtime specializes host descriptors to: 16-byte aligned bases, strides
    # that are multiples of 8 elements (TensorDescriptor asserts 16 bytes)
    attrs = {"a_desc.0": 16, "a_desc.3": 8, "b_desc.0": 16, "b_desc.3": 8, "c_ptr": 16, "a_desc.1": 4,
             "a_desc.2": 8, "b_desc.1": 8, "b_desc.2": 8}
    kernel = _ir(host_desc_matmul, sig, {"BM": bm, "BN": bn, "BK": bk}, attrs)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    assert _tgir_ops(ek).count(Op.MAKE_TENSOR_DESCRIPTOR) == 2 and len(ek.tensormaps) == 2
    rng = np.random.default_rng(9)
    a, a64 = _inputs(rng, (M, K), "fp16")
    b, b64 = _inputs(rng, (N, K), "fp16")
    c = np.full((M, N), np.nan, np.float32)
    # leaves: base, shape (i32), strides (i64, the last the constexpr 1)
    args = [a, M, K, K, b, N, K, K, c, M, N, K]
    ek.run(((M + bm - 1) // bm, (N + bn - 1) // bn, 1), args)
    np.testing.assert_allclose(c, a64 @ b64.T, rtol=2e-3, atol=2e-3)


def test_descriptors_tma_cannot_take_keep_the_pointer_path():
    """A's stride K is not known to be a multiple of 16 bytes (TMA's rule): A goes through
    a cp.async ring, B (stride N) through TMA, in one loop; at capability 80 both are
    cp.async rings."""
    M, N, K = 72, 64, 50
    kernel = _device_kernel("fp16", 64, 64, 32, False, k_div=2)
    mixed = EmulatedKernel(kernel, 4, capability=90)
    ops = _tgir_ops(mixed)
    assert Op.TMA_LOAD in ops and Op.ASYNC_COPY in ops and len(mixed.tensormaps) == 1
    rng = np.random.default_rng(5)
    a, a64 = _inputs(rng, (M, K), "fp16")
    b, b64 = _inputs(rng, (K, N), "fp16")
    c = np.zeros((M, N), np.float32)
    mixed.run((2, 1, 1), [a, b, c, M, N, K])
    np.testing.assert_allclose(c, a64 @ b64, rtol=2e-3, atol=2e-3)
    sm80 = EmulatedKernel(_device_kernel("fp16", 64, 64, 32, True), 4, capability=80)
    assert Op.TMA_LOAD not in _tgir_ops(sm80) and Op.ASYNC_COPY in _tgir_ops(sm80)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("b_nk", [False, True], ids=["b_kn", "b_nk"])
def test_tma_ptx_assembles_for_sm90a(dtype, b_nk):
    asm, md = compile_kernel(_device_kernel(dtype, 128, 128, 64, b_nk), {"num_warps": 8, "num_stages": 4}, 90)
    ptx = asm["ptx"]
    for needle in ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                   "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                   "mbarrier.init.shared::cta.b64", "fence.mbarrier_init.release.cluster",
                   ".param .align 64 .b8", "wgmma.mma_async"):
        assert needle in ptx, needle
    assert "cp.async.cg" not in ptx and "cubin" in asm and md["n_spills"] == 0
    assert [m["swizzle"] for m in md["tensormaps"]] == [128, 128]


@tegula.jit
def desc_store_matmul(a_ptr, b_ptr, c_ptr, M, N, K, LDC, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C written through a descriptor of shape [M, N] and row stride LDC > N: TMA must
    clip the boxes at the edges and leave the bytes past N and M alone."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [LDC, 1], [BM, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pm * BM, k]), b_desc.load([pn * BN, k]).T, acc)
    c_desc.store([pm * BM, pn * BN], acc.to(c_ptr.dtype.element_ty))


@pytest.mark.parametrize("out", ["fp16", "fp32"])
@pytest.mark.parametrize("bm, bn, warps", [(64, 64, 4), (128, 128, 8)])
def test_descriptor_store_runs_on_tma(out, bm, bn, warps):
    M, N, K, ldc = 136, 120, 96, 136
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": f"*{out}", "M": "i32", "N": "i32", "K": "i32",
           "LDC": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16, "LDC": 8, "N": 8}
    kernel = _ir(desc_store_matmul, sig, {"BM": bm, "BN": bn, "BK": 32}, attrs)
    ek = EmulatedKernel(kernel, warps, capability=90, num_stages=3)
    ops = _tgir_ops(ek)
    assert Op.DESCRIPTOR_STORE in ops and Op.STORE not in ops and len(ek.tensormaps) == 3
    rng = np.random.default_rng(bm + (out == "fp32"))
    a, a64 = _inputs(rng, (M, K), "fp16")
    b, b64 = _inputs(rng, (N, K), "fp16")
    dt = np.float16 if out == "fp16" else np.float32
    c = np.full((M + 8, ldc), 7, dt)  # rows past M and columns past N must keep their 7s
    ek.run(((M + bm - 1) // bm, (N + bn - 1) // bn, 1), [a, b, c, M, N, K, ldc])
    want = (a64 @ b64.T).astype(dt).astype(np.float64)
    np.testing.assert_allclose(c[:M, :N].astype(np.float64), want, rtol=2e-3, atol=2e-3)
    assert (c[M:] == 7).all() and (c[:, N:] == 7).all()


def test_descriptor_store_of_rows_not_known_to_end_on_16_bytes_goes_through_pointers():
    """N = 45 f32 columns: the H200 wrote past the row end up to 16 bytes, so such a
    descriptor's stores stay on the pointer path (masked stores clip per element)."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "LDC": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16, "LDC": 8}
    ek = EmulatedKernel(_ir(desc_store_matmul, sig, {"BM": 64, "BN": 64, "BK": 32}, attrs), 4, capability=90)
    ops = _tgir_ops(ek)
    assert Op.DESCRIPTOR_STORE not in ops and Op.STORE in ops and len(ek.tensormaps) == 2


def _fp8_ir(fn, sig, cx, attrs):
    """The kernel as a launch on sm_90 builds it: fp8 dots accumulate imprecisely there
    (Triton's target default), so they are not split into promoted partial sums."""
    return optimized_ir(ASTSource(fn, signature=sig, constexprs=cx, attrs=attrs),
                        {"max_num_imprecise_acc_default": 2**30})


def _fp8(rng, shape, fmt):
    """(bytes the kernel reads, their float64 values) of an fp8 tensor."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}[fmt]
    x = (rng.standard_normal(shape) * 0.5).astype(t)
    return x.view(np.uint8), x.astype(np.float64)


@pytest.mark.parametrize("fmt", ["fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("b_nk", [False, True], ids=["b_kn", "b_nk"])
@pytest.mark.parametrize("bm, bn, bk", [(64, 64, 64), (128, 128, 128)])
def test_fp8_blocks_along_k_run_on_tma(fmt, b_nk, bm, bn, bk):
    """8-bit wgmma operands must lie K-major in their slots: A [M, K] and a B given as
    [N, K] (tutorial 09's) are copied by TMA as they are; a B stored [K, N] runs along
    N, so it is staged by cp.async and transposed on chip (`local_copy`)."""
    M, N, K = 112, 144, 208
    sig = {k: v.format(t=fmt) for k, v in SIG.items()}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": 16, "N": 16, "K": 16}
    kernel = _fp8_ir(desc_matmul, sig, {"BM": bm, "BN": bn, "BK": bk, "B_NK": b_nk, "PAD": "zero"}, attrs)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    ops = _tgir_ops(ek)
    assert [c.version for c in ek.plan.mma.values()] == [3]
    assert len(ek.tensormaps) == 1 + b_nk
    assert (Op.ASYNC_COPY in ops) == (Op.LOCAL_COPY in ops) == (not b_nk)
    rng = np.random.default_rng(bm + b_nk)
    a, a64 = _fp8(rng, (M, K), fmt)
    b, b64 = _fp8(rng, (N, K) if b_nk else (K, N), fmt)
    c = np.full((M, N), np.nan, np.float32)
    ek.run(((M + bm - 1) // bm, (N + bn - 1) // bn, 1), [a, b, c, M, N, K])
    np.testing.assert_allclose(c, a64 @ (b64.T if b_nk else b64), rtol=1e-5, atol=1e-5)


def test_fp8_descriptor_store_runs_on_tma():
    """An fp8 C (tutorial 09's FP8_OUTPUT) stored through TMA, clipped at the edges."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    M, N, K, ldc = 136, 112, 96, 128
    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp8e4nv", "M": "i32", "N": "i32", "K": "i32",
           "LDC": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16, "LDC": 16, "N": 16}
    kernel = _fp8_ir(desc_store_matmul, sig, {"BM": 64, "BN": 64, "BK": 64}, attrs)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    ops = _tgir_ops(ek)
    assert Op.DESCRIPTOR_STORE in ops and Op.STORE not in ops and len(ek.tensormaps) == 3
    rng = np.random.default_rng(8)
    a, a64 = _fp8(rng, (M, K), "fp8e4nv")
    b, b64 = _fp8(rng, (N, K), "fp8e4nv")
    c = np.full((M + 8, ldc), 7, np.uint8)  # bytes past M and N must keep their 7s
    ek.run((3, 2, 1), [a, b, c, M, N, K, ldc])
    f8 = ml_dtypes.float8_e4m3fn
    want = (a64 @ b64.T).astype(np.float32).astype(f8).astype(np.float64)
    np.testing.assert_array_equal(c[:M, :N].view(f8).astype(np.float64), want)
    assert (c[M:] == 7).all() and (c[:, N:] == 7).all()


def test_fp8_nan_padding_keeps_the_pointer_path():
    """An 8-bit map moves bytes, which TMA cannot NaN-fill: a "nan" fp8 descriptor keeps
    the pointer path."""
    sig = {k: v.format(t="fp8e4nv") for k, v in SIG.items()}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": 16, "N": 16, "K": 16}
    kernel = _fp8_ir(desc_matmul, sig, {"BM": 64, "BN": 64, "BK": 64, "B_NK": True, "PAD": "nan"}, attrs)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    assert len(ek.tensormaps) == 1  # B only; A's "nan" descriptor is pointer code


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_fp8_tma_ptx_assembles_for_sm90a():
    sig = {k: v.format(t="fp8e4nv") for k, v in SIG.items()}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": 16, "N": 16, "K": 16}
    kernel = _fp8_ir(desc_matmul, sig, {"BM": 128, "BN": 256, "BK": 128, "B_NK": True, "PAD": "zero"}, attrs)
    asm, md = compile_kernel(kernel, {"num_warps": 8, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in ptx
    assert "cp.async.cg" not in ptx and "cubin" in asm and md["n_spills"] == 0
    assert [m["swizzle"] for m in md["tensormaps"]] == [128, 128]
