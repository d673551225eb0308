"""int8 dots on Hopper's wgmma (`m64nNk32.s32.s8.s8`, no scale or transpose operands):
with A and B pipelined K-major (A row-major, B column-major: a quantized linear
layer's x @ W^T) the dot runs on wgmma, A from its slot or, computed in the loop, from
registers; with a row-major B it stays on mma.sync. Results are exact (wrapping int32
sums, as the interpreter's) on the emulator, and the PTX assembles for sm_90a."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def int8_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                NEGATE_A: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N),
                    other=0)
        if NEGATE_A:  # A computed in the loop: wgmma reads it from registers
            a = -a
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _kernel(column_major_b: bool, negate_a: bool = False, bm=64, bn=64, bk=64):
    sig = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32",
           "sbk": "i32", "sbn": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
           "NEGATE_A": "constexpr"}
    cx = {"BM": bm, "BN": bn, "BK": bk, "NEGATE_A": negate_a}
    unit = "sbk" if column_major_b else "sbn"
    sig[unit], cx[unit] = "constexpr", 1
    attrs = {n: 16 for n, t in sig.items() if t != "constexpr"}
    return optimized_ir(ASTSource(int8_matmul, signature=sig, constexprs=cx, attrs=attrs))


@pytest.mark.parametrize("column_major_b, negate_a, version", [(True, False, 3), (True, True, 3),
                                                               (False, False, 2)],
                         ids=["wgmma", "wgmma_a_in_registers", "row_major_b_on_mma_sync"])
def test_int8_dot_on_the_emulator(column_major_b, negate_a, version):
    kernel = _kernel(column_major_b, negate_a)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [version]
    M, N, K = 80, 96, 208  # not multiples of the blocks; |sums| up to 208 * 128 * 128
    rng = np.random.default_rng(int(column_major_b) + 2 * int(negate_a))
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    if column_major_b:
        b = np.asfortranarray(b)
    c = np.full((M, N), -1, np.int32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K, "sbk": b.strides[0], "sbn": b.strides[1]}
    ek.run(((M + 63) // 64, (N + 63) // 64, 1), [values[n] for n in kernel.arg_names])
    want = (-a if negate_a else a).astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(c, want.astype(np.int32))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("negate_a", [False, True], ids=["a_in_shared", "a_in_registers"])
def test_int8_wgmma_ptx_assembles(negate_a):
    asm, _md = compile_kernel(_kernel(True, negate_a, bm=128, bn=128, bk=128), {"num_warps": 8, "num_stages": 3}, 90)
    assert "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" in asm["ptx"] and "cubin" in asm
    assert "p;" in asm["ptx"]  # scale-d only: no scale or transpose operands for integers
