"""Persistent matmuls (tutorial 09's shape) end to end on every backend (the `on`
fixture): a grid of fewer programs than tiles, each looping over its tiles in
GROUP_M-grouped order with `tl.range(..., flatten=True)`, so on a GPU the software
pipeline crosses tiles and the next tile's coordinates are stepped once per tile
(`pipeline_memo`). Pointer loads with clamped rows and columns as the tutorial writes
them, and device-side tensor descriptors storing C through TMA; an fp16 C (the
accumulator's zero start seen through a layout change); sizes not multiples of the
blocks, tiles per program uneven, K of one and of several blocks; float64
references."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl


@tegula.jit
def _grouped(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    return first_m + (tile % group_m), (tile % per_group) // group_m


@tegula.jit
def persistent_pointer_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                              PROGRAMS: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    tile_c = tl.program_id(0) - PROGRAMS
    rk0 = tl.arange(0, BK)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=True):
        pid_m, pid_n = _grouped(tile, tiles_m, tiles_n, GROUP_M)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rm = tl.max_contiguous(tl.multiple_of(tl.where(rm < M, rm, 0), BM), BM)
        rn = tl.max_contiguous(tl.multiple_of(tl.where(rn < N, rn, 0), BN), BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            rk = ki * BK + rk0
            a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :], mask=rk0[None, :] < K - ki * BK, other=0.0)
            b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :], mask=rk0[:, None] < K - ki * BK, other=0.0)
            acc = tl.dot(a, b, acc)
        tile_c += PROGRAMS
        cm_, cn_ = _grouped(tile_c, tiles_m, tiles_n, GROUP_M)
        cm = cm_ * BM + tl.arange(0, BM)
        cn = cn_ * BN + tl.arange(0, BN)
        tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :], acc.to(tl.float16),
                 mask=(cm[:, None] < M) & (cn[None, :] < N))


@tegula.jit
def persistent_descriptor_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                                 BK: tl.constexpr, GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr,
                                 WS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=True, warp_specialize=WS):
        pid_m, pid_n = _grouped(tile, tiles_m, tiles_n, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            acc = tl.dot(a_desc.load([pid_m * BM, ki * BK]), b_desc.load([pid_n * BN, ki * BK]).T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


def _operands(M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("M, N, K", [(200, 136, 72), (136, 264, 24)])  # K: three blocks, one
def test_persistent_pointer_matmul(on, M, N, K):
    a, b, want = _operands(M, N, K, M + K)
    c = on(np.full((M, N), np.nan, np.float16))
    persistent_pointer_matmul[(3,)](on(a), on(b), c, M, N, K, K, N, N, BM=64, BN=64, BK=32, GROUP_M=2,
                                    PROGRAMS=3, num_warps=4, num_stages=3)
    np.testing.assert_allclose(on.back(c).astype(np.float64), want, rtol=1e-2, atol=3e-2)


@pytest.mark.parametrize("ws", [False, True], ids=["plain", "warp_specialized"])
def test_persistent_descriptor_matmul(on, ws):
    M, N, K = 200, 136, 104  # rows of 16-byte multiples, as TMA needs
    a, b, want = _operands(M, N, K, 7 + ws)
    c = on(np.full((M, N), np.nan, np.float16))
    persistent_descriptor_matmul[(3,)](on(a), on(np.ascontiguousarray(b.T)), c, M, N, K, BM=64, BN=64, BK=32,
                                       GROUP_M=2, PROGRAMS=3, WS=ws, num_warps=4, num_stages=3)
    np.testing.assert_allclose(on.back(c).astype(np.float64), want, rtol=1e-2, atol=3e-2)
