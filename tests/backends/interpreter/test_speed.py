"""Speed smoke tests: print programs/second of the vector add and the tiled matmul
(no timing assertions: the numbers go to the docs, measured on the machine at hand).
Run with `-s` to see them."""
from __future__ import annotations

import time

import numpy as np
from interp_test_kernels import build_matmul, build_vector_add, run


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_vector_add_programs_per_second():
    block, programs = 1024, 2048
    n = block * programs - 7  # the last program is partly masked
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    kernel = build_vector_add(block)
    seconds = _timed(lambda: run(kernel, (programs,), x, y, out, n))
    np.testing.assert_array_equal(out, x + y)
    print(f"\nvector add BLOCK={block}: {programs / seconds:,.0f} programs/s "
          f"({programs} programs in {seconds:.3f} s)")


def test_matmul_programs_per_second():
    size, bm, bn, bk = 1024, 64, 64, 32  # the docs' figure: 256 programs x 32 k-steps
    rng = np.random.default_rng()
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    c = np.zeros((size, size), np.float32)
    kernel = build_matmul(size, size, size, bm, bn, bk)
    programs = (size // bm) * (size // bn)
    seconds = _timed(lambda: run(kernel, (programs,), a, b, c, size, size, size))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    print(f"\nmatmul {size}^3 with {bm}x{bn}x{bk} tiles: {programs / seconds:,.1f} programs/s "
          f"({programs} programs x {size // bk} k-steps in {seconds:.3f} s)")
