"""int8 matmuls with an int32 accumulator end to end on every backend (the `on`
fixture), exact against numpy: B given column-major (a quantized linear layer's
x @ W^T), which on Hopper runs on wgmma (`m64nNk32.s32.s8.s8`), and row-major, which
stays on mma.sync; A also negated in the loop (wgmma then reads it from registers).
Sizes are not multiples of the blocks; sums wrap in int32 as the interpreter's."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "cuda"))
from int8_kernels import int8_matmul  # noqa: E402


@pytest.mark.parametrize("column_major_b, negate_a", [(True, False), (True, True), (False, False)],
                         ids=["b_column_major", "a_negated", "b_row_major"])
def test_int8_matmul(on, column_major_b, negate_a):
    M, N, K = 80, 136, 208
    rng = np.random.default_rng(11 + column_major_b + 2 * negate_a)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    if column_major_b:
        b = np.asfortranarray(b)
    c = on(np.full((M, N), -1, np.int32))
    bm, bn, bk = 64, 64, 64
    grid = ((M + bm - 1) // bm, (N + bn - 1) // bn)
    # strides in elements of the array as it lies where the kernel runs
    sbk, sbn = (1, K) if column_major_b else (N, 1)
    int8_matmul[grid](on(a), on(b), c, M, N, K, sbk, sbn, BM=bm, BN=bn, BK=bk, NEGATE_A=negate_a,
                      num_warps=4, num_stages=3)
    want = (-a if negate_a else a).astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(on.back(c), want.astype(np.int32))
