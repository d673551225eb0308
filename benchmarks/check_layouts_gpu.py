"""GPU check of the tensor-core paths across operand layouts: Triton's tutorial matmul
(benchmarks/kernels.py) on row- and column-major A and B, fp16 and fp8, against torch.
Run on the GPU machine: PYTHONPATH=. python3 benchmarks/check_layouts_gpu.py"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from load import load_tegula_kernels  # noqa: E402


def main() -> int:
    mod = load_tegula_kernels()
    failures = 0
    for dtype in (torch.float16, torch.float8_e4m3fn):
        for a_col in (False, True):
            for b_col in (False, True):
                if dtype.itemsize == 1 and a_col:
                    continue  # fp8 wants K-major A (it still runs: on FMAs, slowly)
                M, N, K = 1000, 760, 1536
                a = torch.randn(K, M, device="cuda").T if a_col else torch.randn(M, K, device="cuda")
                b = torch.randn(N, K, device="cuda").T if b_col else torch.randn(K, N, device="cuda")
                a, b = a.to(dtype), b.to(dtype)
                c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
                ref = (a.float() @ b.float()).half()
                grid = (triton_cdiv(M, 128) * triton_cdiv(N, 128),)
                mod.matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                        c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                        GROUP_M=8, num_warps=8, num_stages=3)
                err = (c.float() - ref.float()).abs().max().item()
                ok = err <= (2.0 if dtype.itemsize == 1 else 0.125)
                failures += not ok
                print(f"{str(dtype):22} A {'col' if a_col else 'row'} B {'col' if b_col else 'row'}: "
                      f"max abs error {err:.4f} {'OK' if ok else 'FAIL'}")
    return failures


def triton_cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


if __name__ == "__main__":
    sys.exit(main())
