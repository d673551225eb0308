"""The int8 matmul the int8 tests share (tests/backends/cuda/test_int8_wgmma.py on the
emulator, tests/e2e/test_int8_matmul.py on every backend): an int32 accumulator, B's
strides as arguments (one of them specialized to 1 selects which way it lies),
`NEGATE_A` computing A in the loop (wgmma then reads it from registers)."""
from __future__ import annotations

import tegula
import tegula.language as tl


@tegula.jit
def int8_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_bk, stride_bn, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, NEGATE_A: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
        if NEGATE_A:
            a = -a
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
