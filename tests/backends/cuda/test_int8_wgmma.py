"""int8 dots on Hopper's wgmma (`m64nNk32.s32.s8.s8`, no scale or transpose operands):
B pipelined either way round (column-major: a quantized linear layer's x @ W^T, copied
K-major as it lies; row-major: transposed through registers into a K-major slot) runs
on wgmma, A from its slot or, computed in the loop, from registers; on sm_80 a
row-major B stays on mma.sync. Results are exact (wrapping int32 sums, as the
interpreter's) on the emulator, and the PTX assembles for sm_90a."""
from __future__ import annotations

import numpy as np
import pytest
from int8_kernels import int8_matmul

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


def _kernel(column_major_b: bool, negate_a: bool = False, bm=64, bn=64, bk=64):
    sig = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32",
           "stride_bk": "i32", "stride_bn": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
           "NEGATE_A": "constexpr"}
    cx = {"BM": bm, "BN": bn, "BK": bk, "NEGATE_A": negate_a}
    unit = "stride_bk" if column_major_b else "stride_bn"
    sig[unit], cx[unit] = "constexpr", 1
    attrs = {n: 16 for n, t in sig.items() if t != "constexpr"}
    return optimized_ir(ASTSource(int8_matmul, signature=sig, constexprs=cx, attrs=attrs))


@pytest.mark.parametrize("column_major_b, negate_a, capability, version",
                         [(True, False, 90, 3), (True, True, 90, 3), (False, False, 90, 3), (False, True, 90, 3),
                          (False, False, 80, 2)],
                         ids=["wgmma", "wgmma_a_in_registers", "row_major_b_wgmma", "row_major_b_wgmma_a_in_registers",
                              "row_major_b_on_mma_sync_sm80"])
def test_int8_dot_on_the_emulator(column_major_b, negate_a, capability, version):
    kernel = _kernel(column_major_b, negate_a)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [version]
    M, N, K = 80, 96, 208  # not multiples of the blocks; |sums| up to 208 * 128 * 128
    rng = np.random.default_rng(int(column_major_b) + 2 * int(negate_a))
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    if column_major_b:
        b = np.asfortranarray(b)
    c = np.full((M, N), -1, np.int32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K,
              "stride_bk": b.strides[0], "stride_bn": b.strides[1]}
    ek.run(((M + 63) // 64, (N + 63) // 64, 1), [values[n] for n in kernel.arg_names])
    want = (-a if negate_a else a).astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(c, want.astype(np.int32))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("column_major_b", [True, False], ids=["b_k_major", "b_n_major"])
@pytest.mark.parametrize("negate_a", [False, True], ids=["a_in_shared", "a_in_registers"])
def test_int8_wgmma_ptx_assembles(negate_a, column_major_b):
    asm, _md = compile_kernel(_kernel(column_major_b, negate_a, bm=128, bn=128, bk=128),
                              {"num_warps": 8, "num_stages": 3}, 90)
    assert "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" in asm["ptx"] and "cubin" in asm
    assert "p;" in asm["ptx"]  # scale-d only: no scale or transpose operands for integers


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("capability", [80])
def test_int8_mma_sync_saturates(capability):
    """On mma.sync an int8 dot is `.satfinite`, as Triton emits it (its test_dot looks
    for `m16n8k32.row.col.satfinite.s32.s8.s8.s32`)."""
    asm, _md = compile_kernel(_kernel(False), {"num_warps": 4, "num_stages": 3}, capability)
    assert "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32" in asm["ptx"] and "cubin" in asm


@tegula.jit
def int8_invariant_b(a_ptr, b_ptr, c_ptr, steps, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """B loaded once before the loop (staged in shared memory for wgmma where it lies
    K-major), A streamed: c = sum over steps of A_i @ B."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for i in range(steps):
        a = tl.load(a_ptr + i * BM * BK + rm[:, None] * BK + rk[None, :])
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("column_major_b", [True, False], ids=["b_k_major", "b_n_major"])
def test_int8_loop_invariant_b(column_major_b):
    """A B staged before the loop feeds wgmma either way round: K-major copied as it
    lies, N-major transposed on its way into the K-major slot."""
    sig = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32", "steps": "i32", "sbk": "i32", "sbn": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    cx = {"BM": 64, "BN": 64, "BK": 64}
    unit = "sbk" if column_major_b else "sbn"
    sig[unit], cx[unit] = "constexpr", 1
    kernel = optimized_ir(ASTSource(int8_invariant_b, signature=sig, constexprs=cx,
                                    attrs={n: 16 for n, t in sig.items() if t != "constexpr"}))
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [3]
    rng = np.random.default_rng(7 + column_major_b)
    steps = 3
    a = rng.integers(-128, 128, (steps, 64, 64), dtype=np.int8)
    b = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    if column_major_b:
        b = np.asfortranarray(b)
    c = np.full((64, 64), -1, np.int32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "steps": steps, "sbk": b.strides[0], "sbn": b.strides[1]}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    want = sum(a[i].astype(np.int64) @ b.astype(np.int64) for i in range(steps))
    np.testing.assert_array_equal(c, want.astype(np.int32))
