"""Triton's grouped GEMM pattern (tutorial 08) with its discarded in-loop hints
`tl.multiple_of(a_ptrs, [16, 16])`: hints apply in place, so the compiled backends
vectorize (the CUDA lowering pipelines the loop onto 16-byte cp.async copies, here run
through the host emulator) and the results still match numpy on every backend."""
from __future__ import annotations

import numpy as np

import tegula as triton
import tegula.language as tl


@triton.jit
def _grouped(a_table, b_table, c_table, sizes, lds, n_groups, NUM_PROGRAMS: tl.constexpr,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tile = tl.program_id(0)
    first = 0
    for g in range(n_groups):
        m, n, k = tl.load(sizes + 3 * g), tl.load(sizes + 3 * g + 1), tl.load(sizes + 3 * g + 2)
        tiles_n = tl.cdiv(n, BN)
        count = tl.cdiv(m, BM) * tiles_n
        while tile >= first and tile < first + count:
            lda, ldb, ldc = tl.load(lds + 3 * g), tl.load(lds + 3 * g + 1), tl.load(lds + 3 * g + 2)
            a = tl.load(a_table + g).to(tl.pointer_type(tl.float16))
            b = tl.load(b_table + g).to(tl.pointer_type(tl.float16))
            c = tl.load(c_table + g).to(tl.pointer_type(tl.float16))
            rm = ((tile - first) // tiles_n) * BM + tl.arange(0, BM)
            rn = ((tile - first) % tiles_n) * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            a_ptrs = a + rm[:, None] * lda + rk[None, :]
            b_ptrs = b + rk[:, None] * ldb + rn[None, :]
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BK)):
                tl.multiple_of(a_ptrs, [16, 16])
                tl.multiple_of(b_ptrs, [16, 16])
                acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
                a_ptrs += BK
                b_ptrs += BK * ldb
            tl.store(c + rm[:, None] * ldc + rn[None, :], acc.to(tl.float16))
            tile += NUM_PROGRAMS
        first += count


def test_grouped_gemm_with_discarded_hints_is_correct(on):
    rng = np.random.default_rng()
    shapes = [(32, 32, 64), (64, 32, 32), (32, 64, 96)]  # full tiles, as the tutorial assumes
    As = [on(rng.standard_normal((m, k)).astype(np.float16)) for m, n, k in shapes]
    Bs = [on(rng.standard_normal((k, n)).astype(np.float16)) for m, n, k in shapes]
    Cs = [on(np.zeros((m, n), np.float16)) for m, n, k in shapes]

    def address(x):
        return x.data_ptr() if on.backend == "cuda" else x.ctypes.data

    table = lambda xs: on(np.array([address(x) for x in xs], dtype=np.int64))  # noqa: E731
    sizes = on(np.array([[m, n, k] for m, n, k in shapes], dtype=np.int32))
    lds = on(np.array([[k, n, n] for m, n, k in shapes], dtype=np.int32))
    _grouped[(3,)](table(As), table(Bs), table(Cs), sizes, lds, len(shapes), 3, 32, 32, 32,
                   num_warps=4, num_stages=3)
    if on.backend == "cuda-emulated":  # the CUDA lowering pipelined the K loop
        compiled = [c for cache in _grouped.device_caches.values() for c in cache[0].values()]
        assert any("async_copy" in c.asm["tgir"] for c in compiled)
    for a, b, c in zip(As, Bs, Cs):
        want = on.back(a).astype(np.float32) @ on.back(b).astype(np.float32)
        np.testing.assert_allclose(on.back(c).astype(np.float32), want, rtol=1e-2, atol=5e-2)
