"""wgmma with operand A from registers for 8-bit types (sm_90a): Triton's fp8 attention
forward (tutorial 06) keeps Q in registers across the loop and computes P there, so
both of its dots take A from registers and B, K-major, from a pipelined slot. Checked on
the host emulator against float64 (inputs chosen so that every dot is exact and P's
rounding to fp8 is the same as numpy's), and assembled by ptxas."""
from __future__ import annotations

import numpy as np
import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas

FP8 = {"fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}


@tegula.jit
def attention_like(q_ptr, k_ptr, vt_ptr, o_ptr, N, scale, BM: tl.constexpr, BN: tl.constexpr,
                   D: tl.constexpr):
    """o = sum over KV blocks of fp8(scale * q @ k_blk^T) @ v_blk, with v stored
    transposed ([D, N], as tutorial 06 stores fp8 V), so that both B operands are
    K-major; q is loaded once (registers), p is computed (registers)."""
    rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    for n in range(0, N, BN):
        k = tl.load(k_ptr + (n + rn)[:, None] * D + rd[None, :])
        s = tl.dot(q, tl.trans(k))
        p = (s * scale).to(q.dtype)
        vt = tl.load(vt_ptr + rd[:, None] * N + (n + rn)[None, :])
        acc = tl.dot(p, tl.trans(vt), acc)
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc)


def _kernel(fmt: str, bm: int, bn: int, d: int):
    sig = {"q_ptr": f"*{fmt}", "k_ptr": f"*{fmt}", "vt_ptr": f"*{fmt}", "o_ptr": "*fp32", "N": "i32",
           "scale": "fp32", "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
    attrs = {n: 16 for n in ("q_ptr", "k_ptr", "vt_ptr", "o_ptr", "N")}
    return tir_opt(attention_like, sig, {"BM": bm, "BN": bn, "D": d}, attrs=attrs)


@pytest.mark.parametrize("fmt", sorted(FP8))
@pytest.mark.parametrize("num_warps", [4, 8])
def test_fp8_register_a_on_the_emulator(fmt, num_warps):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f8 = getattr(ml_dtypes, FP8[fmt])
    BM, BN, D, N = 64 * (num_warps // 4), 64, 64, 192
    kernel = _kernel(fmt, BM, BN, D)
    ek = EmulatedKernel(kernel, num_warps, capability=90, num_stages=3)
    assert sorted(c.version for c in ek.plan.mma.values()) == [3, 3]
    rng = np.random.default_rng(7 + num_warps)
    # small integers: every product and sum below is exact in f32
    q = rng.integers(-3, 4, (BM, D)).astype(f8)
    k = rng.integers(-3, 4, (N, D)).astype(f8)
    v = rng.integers(-3, 4, (N, D)).astype(f8)
    vt = np.ascontiguousarray(v.T)
    scale = 1.0 / 64
    o = np.full((BM, D), np.nan, np.float32)
    values = {"q_ptr": q.view(np.uint8), "k_ptr": k.view(np.uint8), "vt_ptr": vt.view(np.uint8), "o_ptr": o,
              "N": N, "scale": scale}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    want = np.zeros((BM, D))
    for n in range(0, N, BN):
        s = q.astype(np.float64) @ k[n:n + BN].astype(np.float64).T
        p = (s.astype(np.float32) * np.float32(scale)).astype(f8)
        want += p.astype(np.float64) @ v[n:n + BN].astype(np.float64)
    np.testing.assert_allclose(o, want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("fmt", sorted(FP8))
def test_fp8_register_a_ptx_assembles(fmt):
    asm, _md = compile_kernel(_kernel(fmt, 128, 64, 128), {"num_warps": 8, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    ab = "e4m3" if fmt == "fp8e4nv" else "e5m2"
    assert f"wgmma.mma_async.sync.aligned.m64n64k32.f32.{ab}.{ab}" in ptx      # s = q @ k^T
    assert f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{ab}.{ab}" in ptx     # acc += p @ v
    assert "fma.rn.f32" not in ptx and "cubin" in asm
