"""Warp-specialized loops (`tl.range(..., warp_specialize=True)`) end to end on every
backend (the `on` fixture): on a Hopper GPU a producer warpgroup issues the TMA copies
and the kernel's warps compute; elsewhere the hint changes nothing. A descriptor matmul
(8 consumer warps, B read through `.T`) and tutorial 06's forward shape, causal and not;
sizes are not multiples of the blocks, references in float64. The emulator's runs of
the split itself are in tests/backends/cuda/test_warp_specialize_emulated.py."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "cuda"))
from ws_kernels import ws_attention, ws_matmul  # noqa: E402


def test_warp_specialized_matmul(on):
    M, N, K = 136, 136, 104  # two tiles each way (the second partial), two K steps
    rng = np.random.default_rng(31)
    a = rng.standard_normal((M, K)).astype(np.float16)
    bt = rng.standard_normal((N, K)).astype(np.float16)
    c = on(np.full((M, N), np.nan, np.float16))
    bm, bn, bk = 128, 128, 64
    grid = (((M + bm - 1) // bm) * ((N + bn - 1) // bn),)
    ws_matmul[grid](on(a), on(bt), c, M, N, K, BM=bm, BN=bn, BK=bk, B_NK=True, WS=True, num_warps=8, num_stages=3)
    want = a.astype(np.float64) @ bt.astype(np.float64).T
    np.testing.assert_allclose(on.back(c).astype(np.float64), want, rtol=2e-2, atol=3e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_warp_specialized_attention_forward(on, causal):
    H, N, D = 1, 128, 64  # two blocks of rows and of keys (the kernel, as tutorial 06's, needs whole ones)
    rng = np.random.default_rng(32 + causal)
    q, k, v = (rng.standard_normal((2, H, N, D)).astype(np.float16) * np.float16(0.5) for _ in range(3))
    o = on(np.zeros_like(q))
    bm = 64
    ws_attention[((N + bm - 1) // bm, 2 * H)](on(q), on(k), on(v), o, 0.3, H, N, D=D, BM=bm, BN=64, CAUSAL=causal,
                                              WS=True, num_warps=4, num_stages=3)
    s = np.einsum("zhmd,zhnd->zhmn", q.astype(np.float64), k.astype(np.float64)) * 0.3
    if causal:
        s = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("zhmn,zhnd->zhmd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    np.testing.assert_allclose(on.back(o).astype(np.float64), want, atol=4e-3)
