"""Dots with an f16 accumulator (`out_dtype=tl.float16`, f16 operands) on the tensor
cores, as Triton runs them: `mma.sync.m16n8k16.row.col.f16.f16.f16.f16` (sm_80) and
`wgmma.mma_async.m64nNk16.f16.f16.f16` (sm_90a), the accumulators packed two to a
32-bit register (`packed_registers`). Each instruction rounds its sum to f16, so the
result is what accumulating 16 products at a time in f16 gives: checked on the host
emulator, in a pipelined loop and in a lone dot, at both capabilities, bit for bit
against numpy doing the same (rounding to f16 after every 16 products) and against
float64 within f16 accumulation's error; and the PTX assembles."""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas


@tegula.jit
def f16_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :],
                    mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tegula.jit
def f16_lone_dot(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """One dot outside any loop (Triton's test_dot): B staged for wgmma on sm_90a."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    c = tl.dot(a, b, out_dtype=tl.float16)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
       "sam": "i32", "sbk": "i32", "scm": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}


def _loop_kernel(bm=64, bn=64, bk=32, div=8):
    return tir_opt(f16_matmul, SIG, {"BM": bm, "BN": bn, "BK": bk},
                   attrs={n: div for n, t in SIG.items() if t != "constexpr"})


def _lone_kernel(bm, bn, bk):
    sig = {n: SIG[n] for n in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "BM", "BN", "BK")}
    return tir_opt(f16_lone_dot, sig, {"BM": bm, "BN": bn, "BK": bk},
                   attrs={n: 16 for n, t in sig.items() if t != "constexpr" and n != "M"})


def f16_accumulated(a: np.ndarray, b: np.ndarray, step: int = 16) -> np.ndarray:
    """a @ b accumulated as the emulator's models of the instructions do with an f16
    accumulator: each instruction widens the accumulator to f32, adds its `step`
    products one k at a time in f32 (f16 products are exact in f32) and rounds the sum
    to f16 once (the hardware's order within an instruction is unspecified)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for k0 in range(0, a.shape[1], step):
        wide = acc.astype(np.float32)
        for k in range(k0, min(k0 + step, a.shape[1])):
            wide = wide + np.outer(a32[:, k], b32[k])
        acc = wide.astype(np.float16)
    return acc


def _check(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_array_equal(c, f16_accumulated(a, b))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), exact, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("capability, version", [(90, 3), (80, 2)], ids=["wgmma", "mma_sync"])
def test_f16_accumulator_loop_on_the_emulator(capability, version):
    kernel = _loop_kernel()
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    choices = list(ek.plan.mma.values())
    assert [(c.version, c.acc_type) for c in choices] == [(version, "f16")]
    M, N, K = 80, 72, 200  # not multiples of the blocks
    rng = np.random.default_rng(capability)
    a = (rng.standard_normal((M, K)) * 0.5).astype(np.float16)
    b = (rng.standard_normal((K, N)) * 0.5).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K, "sam": K, "sbk": N, "scm": N}
    ek.run(((M + 63) // 64, (N + 63) // 64, 1), [values[n] for n in kernel.arg_names])
    _check(c, a, b)


@pytest.mark.parametrize("capability, version", [(90, 3), (80, 2)], ids=["wgmma", "mma_sync"])
def test_f16_accumulator_lone_dot_on_the_emulator(capability, version):
    kernel = _lone_kernel(64, 128, 64)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    assert [(c.version, c.acc_type) for c in ek.plan.mma.values()] == [(version, "f16")]
    M, N, K = 50, 112, 64  # M, N below the block (N keeps its divisibility by 16)
    rng = np.random.default_rng(7 + capability)
    a = (rng.standard_normal((M, K)) * 0.5).astype(np.float16)
    b = (rng.standard_normal((K, N)) * 0.5).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    _check(c, a, b)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("capability, pattern", [
    (90, r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f16\.f16\.f16"),
    (80, r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f16\.f16\.f16\.f16")], ids=["sm_90a", "sm_80"])
def test_f16_accumulator_ptx(capability, pattern):
    """Triton's test_dot looks for exactly these instructions; no f32 accumulation."""
    for kernel in (_loop_kernel(128, 128, 64, div=16), _lone_kernel(128, 128, 64)):
        asm, _md = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, capability)
        ptx = asm["ptx"]
        assert re.search(pattern, ptx) and "cubin" in asm
        assert ".f32.f16.f16" not in ptx
