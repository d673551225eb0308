"""fp8 dots with `max_num_imprecise_acc` (sm_90a): a dot whose limit L is at most its K
runs on wgmma with partial accumulators — each run of L products in a fresh one,
waited for and added to the f32 accumulator with `add.f32` (Triton's promotion) —
instead of falling back to FMAs; such a dot is never left in flight. Unset, it
accumulates in place; a limit that is no multiple of wgmma's k32 takes ceil(L / 32)
instructions per partial sum, 0 one, as in Triton. Checked on the host emulator against float64 and in the PTX."""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_pipeline_loops import B_COLUMN_MAJOR, SIG, tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.ir.ops import Op


@tegula.jit
def fp8_matmul_limited(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, LIMIT: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=LIMIT)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _kernel(fmt, bk, limit, div=8):
    sig = dict(SIG, a_ptr=f"*{fmt}", b_ptr=f"*{fmt}", LIMIT="constexpr")
    cx = {"BM": 64, "BN": 64, "BK": bk, "LIMIT": limit}
    for n in B_COLUMN_MAJOR:
        sig[n], cx[n] = "constexpr", 1
    return tir_opt(fp8_matmul_limited, sig, cx, attrs={n: div for n, t in sig.items() if t != "constexpr"})


@pytest.mark.parametrize("fmt", ["fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("limit, promote", [(32, 1), (64, 2), (None, 0)])
def test_promoted_fp8_dots_on_the_emulator(fmt, limit, promote):
    """BK = 64 (two k32 steps per dot): L = 32 adds a partial accumulator every step,
    L = 64 once per dot; unset accumulates in place (a limit above K is an error of
    `tl.dot`, as in Triton)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    np_fmt = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}[fmt]
    M, N, K = 120, 72, 160
    kernel = _kernel(fmt, 64, limit)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    choices = list(ek.plan.mma.values())
    assert [c.version for c in choices] == [3] and choices[0].promote == promote
    dot_waits = [i for i in ek.lowering.kernel.walk() if i.op is Op.DOT_WAIT]
    assert bool(dot_waits) == (promote == 0)  # a promoted dot is waited for where it runs
    rng = np.random.default_rng(11 + promote)
    a = rng.standard_normal((M, K)).astype(np_fmt)
    b = np.asfortranarray(rng.standard_normal((K, N)).astype(np_fmt))
    c = np.full((M, N), np.nan, np.float32)
    values = {"a_ptr": a.view(np.uint8), "b_ptr": b.view(np.uint8), "c_ptr": c, "M": M, "N": N, "K": K,
              "sam": K, "sbn": b.strides[1], "scm": N}
    ek.run(((M + 63) // 64, (N + 63) // 64, 1), [values[n] for n in kernel.arg_names])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_promotion_in_the_ptx():
    """BK = 128 with L = 32: four wgmmas per dot, each followed by a wait and one add
    per accumulator register after the first (32 per thread for 64x64 over 4 warps) — Triton's
    `dot_high_precision_acc` shape."""
    asm, _md = compile_kernel(_kernel("fp8e4nv", 128, 32, div=16), {"num_warps": 4, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k32\.f32\.e4m3\.e4m3", ptx)) == 4
    assert len(re.findall(r"wgmma\.wait_group\.sync\.aligned 0", ptx)) >= 4
    assert len(re.findall(r"\badd(\.rn)?\.f32\b", ptx)) >= 3 * 32
    # Triton's rule for an L that is no multiple of 32: partial sums of ceil(L / 32)
    # instructions (L = 48: every second one, two adds per dot); L = 0: every one
    for limit, adds in ((48, 2), (0, 4)):
        asm, _md = compile_kernel(_kernel("fp8e4nv", 128, limit, div=16), {"num_warps": 4, "num_stages": 3}, 90)
        assert len(re.findall(r"wgmma\.mma_async", asm["ptx"])) == 4
        # counted as Triton's test counts them: the adds contract (`add.f32`, not `add.rn.f32`)
        assert asm["ptx"].count("add.f32") == adds * 32


def _row_major_b_kernel(fmt, bk, limit):
    sig = dict(SIG, a_ptr=f"*{fmt}", b_ptr=f"*{fmt}", LIMIT="constexpr")
    cx = {"BM": 64, "BN": 64, "BK": bk, "LIMIT": limit}
    for n in ("sak", "sbn", "scn"):  # A and B row-major, as Triton's test_dot_max_num_imprecise_acc
        sig[n], cx[n] = "constexpr", 1
    return tir_opt(fp8_matmul_limited, sig, cx, attrs={n: 16 for n, t in sig.items() if t != "constexpr"})


@pytest.mark.parametrize("fmt", ["fp8e4nv", "fp8e5"])
def test_promotion_with_row_major_b(fmt):
    """Triton's test_dot_max_num_imprecise_acc loads B row-major: its slot is stored
    K-major (the copies transpose it), so the dot runs on wgmma with the promotion rule,
    `add.f32` as many as Triton counts: BM·BN / (32·warps) · BK / L."""
    asm, _md = compile_kernel(_row_major_b_kernel(fmt, 128, 32), {"num_warps": 4, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    ab = {"fp8e4nv": "e4m3", "fp8e5": "e5m2"}[fmt]
    assert len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n64k32\.f32\.{ab}\.{ab}", ptx)) == 4
    assert ptx.count("add.f32") == 64 * 64 // (32 * 4) * (128 // 32)
