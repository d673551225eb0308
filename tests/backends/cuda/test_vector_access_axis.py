"""A vector access runs along the pointers' contiguous dimension only: a load whose
layout's leading registers run along another dimension is done element by element.
Triton's test_dot with a column-major A (stride along M = 1) on sm_90a loads A in
wgmma's register-A layout, whose register pairs run along K; the loads were 4-byte
vectors of two elements along M, and every result was wrong. Checked on the host
emulator against float64, at both capabilities."""
from __future__ import annotations

import numpy as np
import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda.emulator import EmulatedKernel


@tegula.jit
def lone_dot_column_major_a(a_ptr, b_ptr, c_ptr, sak, sbk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] + rk[None, :] * sak)
    b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize("capability", [90, 80])
@pytest.mark.parametrize("bm, bn, bk", [(64, 64, 64), (64, 128, 128)])
def test_column_major_a_lone_dot(capability, bm, bn, bk):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "sak": "i32", "sbk": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    kernel = tir_opt(lone_dot_column_major_a, sig, {"BM": bm, "BN": bn, "BK": bk},
                     attrs={n: 16 for n, t in sig.items() if t != "constexpr"})
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    rng = np.random.default_rng(bm + bn + capability)
    a = np.asfortranarray(rng.standard_normal((bm, bk)).astype(np.float16))
    b = rng.standard_normal((bk, bn)).astype(np.float16)
    c = np.full((bm, bn), np.nan, np.float32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "sak": bm, "sbk": bn}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
