"""Speed of the numpy reference interpreter, through the public launch path.

Usage:  python benchmarks/interpreter_speed.py

Reports programs per second for vector add (BLOCK 1024) and for a matmul with
64x64x32 tiles, and the wall time of a 1024x1024x1024 fp32 matmul with those tiles.
Each result is checked against numpy before it is reported.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tegula  # noqa: E402
import tegula.language as tl  # noqa: E402


@tegula.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@tegula.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        av = tl.load(a, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        bv = tl.load(b, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(av, bv, acc, input_precision="ieee")
        a += BK * sak
        b += BK * sbk
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def vector_add_rate(n: int = 1024 * 2000) -> float:
    rng = np.random.default_rng()
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.empty_like(x)
    grid = (tegula.cdiv(n, 1024),)
    add_kernel[grid](x[:1024], y[:1024], out[:1024], 1024, BLOCK=1024)  # compile outside the timing
    t0 = time.perf_counter()
    add_kernel[grid](x, y, out, n, BLOCK=1024)
    dt = time.perf_counter() - t0
    np.testing.assert_array_equal(out, x + y)
    return grid[0] / dt


def matmul_time(M: int, N: int, K: int) -> tuple[float, int]:
    rng = np.random.default_rng()
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    c = np.empty((M, N), dtype=np.float32)
    grid = (tegula.cdiv(M, 64), tegula.cdiv(N, 64))

    def launch():
        matmul_kernel[grid](a, b, c, M, N, K, a.strides[0] // 4, a.strides[1] // 4, b.strides[0] // 4,
                            b.strides[1] // 4, c.strides[0] // 4, c.strides[1] // 4, BM=64, BN=64, BK=32)

    launch()  # compile (and check) outside the timing
    t0 = time.perf_counter()
    launch()
    dt = time.perf_counter() - t0
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err
    return dt, grid[0] * grid[1]


def main() -> None:
    rate = vector_add_rate()
    print(f"vector add BLOCK=1024:            {rate:10.0f} programs/s")
    dt, programs = matmul_time(512, 512, 512)
    print(f"matmul 64x64x32 tiles, K=512:     {programs / dt:10.1f} programs/s "
          f"({programs / dt * 16:.0f} k-iterations/s)")
    dt, programs = matmul_time(1024, 1024, 1024)
    print(f"matmul fp32 1024^3, 64x64x32:     {dt:10.2f} s  ({programs} programs)")


if __name__ == "__main__":
    main()
