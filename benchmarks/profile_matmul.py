"""Run one matmul of the benchmark kernel a few times, for a profiler to attach to.

    ncu --kernel-name regex:matmul --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
        python3 benchmarks/profile_matmul.py tegula 3000 float16 128,128,64,4,4

`who` is tegula or triton (the same source, `benchmarks/kernels.py`); the result is
checked against torch.matmul before the profiled launches.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.load import load_tegula_kernels, load_triton_kernels  # noqa: E402


def main() -> None:
    who, size, dt, cfg = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    bm, bn, bk, stages, warps = (int(x) for x in cfg.split(","))
    mod = load_tegula_kernels() if who == "tegula" else load_triton_kernels()
    dtype = getattr(torch, dt)
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    c = torch.empty(size, size, device="cuda", dtype=dtype)
    grid = ((size + bm - 1) // bm * ((size + bn - 1) // bn),)

    def run():
        mod.matmul_kernel[grid](a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                num_warps=warps, num_stages=stages)
    run()
    torch.testing.assert_close(c, torch.matmul(a, b), atol=0.125, rtol=0.02)
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    print(who, size, dt, cfg, "ok")


if __name__ == "__main__":
    main()
