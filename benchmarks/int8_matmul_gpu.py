"""int8 matmul (int32 accumulator) under tegula and under the real Triton, beside
torch._int_mm (cuBLAS), side by side in one process (GPU only), results checked exactly
against torch._int_mm first.

    python benchmarks/int8_matmul_gpu.py [--sizes 4096 8192] [--config 128 256 128 3 8]

A is row-major and B column-major (x @ W^T of a quantized linear layer; what
torch._int_mm takes): both K-major, so on Hopper the dot can run on wgmma
(`m64nNk32.s32.s8.s8`). The kernel is `benchmarks/kernels.py`'s `matmul_kernel` with
`ACC_DTYPE=tl.int32` (the tutorial matmul). Prints TOPS and the ratios.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.load import load_tegula_kernels, load_triton_kernels  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", type=int, default=[4096, 8192])
    p.add_argument("--config", nargs=5, type=int, default=(128, 256, 128, 3, 8))
    args = p.parse_args()
    bm, bn, bk, stages, warps = args.config
    import tegula.testing

    who = {"tegula": load_tegula_kernels()}
    triton_mod = load_triton_kernels()
    if triton_mod is not None:
        who["triton"] = triton_mod
    print(f"int8 matmul, config {tuple(args.config)}; TOPS")
    for size in args.sizes:
        a = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8).t()  # column-major
        ref = torch._int_mm(a, b)
        row = {}
        grid = (((size + bm - 1) // bm) * ((size + bn - 1) // bn),)
        for name, mod in who.items():
            c = torch.empty(size, size, device="cuda", dtype=torch.int32)

            def run(mod=mod, c=c):
                mod.matmul_kernel[grid](a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0),
                                        b.stride(1), c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn,
                                        BLOCK_K=bk, GROUP_M=8, ACC_DTYPE=mod.tl.int32, num_warps=warps,
                                        num_stages=stages)
            try:
                run()
            except Exception as e:  # a compiler may refuse the config
                print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}")
                continue
            torch.testing.assert_close(c, ref, atol=0, rtol=0)
            row[name] = 2 * size ** 3 / tegula.testing.do_bench(run) / 1e9
        row["cublas"] = 2 * size ** 3 / tegula.testing.do_bench(lambda: torch._int_mm(a, b)) / 1e9
        cells = " ".join(f"{n}={v:7.1f}" for n, v in row.items())
        ratios = [f"tegula/{o}={row['tegula'] / row[o]:.3f}" for o in ("triton", "cublas")
                  if "tegula" in row and o in row]
        print(f"{size:6d} {cells}  {'  '.join(ratios)}")


if __name__ == "__main__":
    main()
