"""Lone dots on the GPU: 8192 programs, each one tile product A[b] @ B[b] (no K loop),
fp16, several shapes and A row- or column-major; prints per shape (time in µs, GB/s,
max error against torch.bmm in float32) as JSON.

    python benchmarks/lone_dot_gpu.py tegula|triton

`tegula` runs the tegula found on PYTHONPATH (point it at another checkout to compare
two versions of the compiler), `triton` the real Triton; run both in one device call
and compare there.
"""
import json
import sys

import torch
from triton.testing import do_bench  # the real Triton's timer, for both compilers

WHO = sys.argv[1] if len(sys.argv) > 1 else "tegula"
if WHO == "triton":
    import triton
    import triton.language as tl
else:
    import tegula as triton
    import tegula.language as tl


@triton.jit
def lone(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACOL: tl.constexpr):
    b = tl.program_id(0)
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    if ACOL:
        a = tl.load(a_ptr + b * BM * BK + rm[:, None] + rk[None, :] * BM)
    else:
        a = tl.load(a_ptr + b * BM * BK + rm[:, None] * BK + rk[None, :])
    w = tl.load(b_ptr + b * BK * BN + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + b * BM * BN + rm[:, None] * BN + rn[None, :], tl.dot(a, w).to(tl.float16))


def main() -> None:
    out = {}
    for (bm, bn, bk, w, acol) in [(64, 64, 64, 4, 0), (128, 128, 64, 4, 0), (128, 128, 64, 8, 0), (64, 128, 128, 4, 0),
                                  (128, 64, 32, 4, 0), (64, 64, 64, 4, 1), (128, 128, 64, 8, 1)]:
        nb = 8192
        A = torch.randn(nb, bm, bk, device="cuda", dtype=torch.float16)
        B = torch.randn(nb, bk, bn, device="cuda", dtype=torch.float16)
        C = torch.empty(nb, bm, bn, device="cuda", dtype=torch.float16)
        Ain = A.transpose(1, 2).contiguous() if acol else A
        f = lambda: lone[(nb,)](Ain, B, C, BM=bm, BN=bn, BK=bk, ACOL=acol, num_warps=w)
        f()
        ref = torch.bmm(A.float(), B.float())
        err = (C.float() - ref).abs().max().item()
        ms = do_bench(f, rep=200, return_mode="median")
        gbs = (A.numel() + B.numel() + C.numel()) * 2 / ms / 1e6
        out[f"{bm}x{bn}x{bk}w{w}{'acol' if acol else ''}"] = (round(ms * 1000, 1), round(gbs), err)
    print(WHO, json.dumps(out))


if __name__ == "__main__":
    main()
