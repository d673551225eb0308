"""Warp placement of chained mma.sync dots (`dot_chains`, `mma.mma_warps`): a dot that
shares data with another dot of its block puts its warps along M (Triton's placement),
so that attention's P, an accumulator whose warps hold whole rows, is the next dot's A
fragment after the cast without an exchange through shared memory."""
from __future__ import annotations

import numpy as np
from test_layout_choices import _loop_text
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.compiler import to_tgir
from tegula.backends.cuda.dot_chains import chained_dots
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.mma import mma_warps


@tegula.jit
def scores_then_values(q_ptr, k_ptr, v_ptr, o_ptr, N, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """Attention's inner loop without the running maximum: P = exp2(Q·Kᵀ / 8) cast to
    f16, then P·V accumulated."""
    rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    for start in range(0, N, BN):
        k = tl.load(k_ptr + (start + rn)[None, :] * D + rd[:, None])
        v = tl.load(v_ptr + (start + rn)[:, None] * D + rd[None, :])
        p = tl.exp2(tl.dot(q, k) * 0.125)
        acc += tl.dot(p.to(tl.float16), v)
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc)


@tegula.jit
def two_unrelated_dots(a_ptr, b_ptr, c_ptr, d_ptr):
    """Two dots on separate data and index ranges: nothing joins them but their block
    (Triton's slice follows data, so shared index math would join them)."""
    r, c = tl.arange(0, 64), tl.arange(0, 32)
    x = tl.dot(tl.load(a_ptr + r[:, None] * 32 + c[None, :]), tl.load(b_ptr + c[:, None] * 64 + r[None, :]))
    tl.store(a_ptr + r[:, None] * 64 + r[None, :], x.to(tl.float16))
    s, t = tl.arange(0, 128), tl.arange(0, 16)
    y = tl.dot(tl.load(c_ptr + s[:, None] * 16 + t[None, :]), tl.load(d_ptr + t[:, None] * 128 + s[None, :]))
    tl.store(c_ptr + s[:, None] * 128 + s[None, :], y.to(tl.float16))


SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32",
       "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}


def _attention_ir(BM=64, BN=32, D=32):
    return tir_opt(scores_then_values, SIG, {"BM": BM, "BN": BN, "D": D}, num_stages=1,
                   attrs={p: 16 for p in SIG if p.endswith("_ptr")})


def test_mma_warps_of_a_chained_dot_run_along_m():
    assert mma_warps(64, 64, 4) == (2, 2)  # unchained: split where more instructions are left
    assert mma_warps(64, 64, 4, chained=True) == (4, 1)
    assert mma_warps(32, 128, 4, chained=True) == (1, 4)  # N > M: along N
    assert mma_warps(32, 64, 4, chained=True) == (1, 4)
    assert mma_warps(32, 32, 4, chained=True) == mma_warps(32, 32, 4)  # M too short for 4 warps of 16 rows


def test_the_scores_and_values_dots_are_chained_and_unrelated_ones_are_not():
    tgir = to_tgir(_attention_ir(), 4, 1, 80, False)[0]
    assert len(chained_dots(tgir)) == 2
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "d_ptr": "*fp16"}
    other = tir_opt(two_unrelated_dots, sig, {}, num_stages=1)
    assert not chained_dots(to_tgir(other, 4, 1, 80, False)[0])


def test_p_becomes_the_a_fragment_without_shared_memory_and_is_exact():
    kernel = _attention_ir()
    for capability in (80, 90):
        tgir = compile_kernel(kernel, {"num_warps": 4, "num_stages": 1}, capability)[0]["tgir"]
        if capability == 80:
            assert tgir.count("#mma<version=2, warps=[4, 1]") > 0
            moved = [ln for ln in _loop_text(tgir).splitlines() if "convert_layout" in ln and "smem(" in ln
                     and "tile<64x32xf16" in ln]
            assert not moved, moved
        rng = np.random.default_rng(capability)
        N = 96
        q = rng.integers(-2, 3, (64, 32)).astype(np.float16)
        k = rng.integers(-2, 3, (N, 32)).astype(np.float16)
        v = rng.integers(-2, 3, (N, 32)).astype(np.float16)
        o = np.full((64, 32), np.nan, np.float32)
        EmulatedKernel(kernel, 4, capability=capability, num_stages=1).run((1, 1, 1), [q, k, v, o, N])
        p = np.exp2((q.astype(np.float64) @ k.T.astype(np.float64)) * 0.125).astype(np.float16)
        np.testing.assert_allclose(o, p.astype(np.float64) @ v.astype(np.float64), rtol=2e-3, atol=1e-2)

