"""Triton's tutorial 09 (persistent matmul) kernels, unmodified, at one pinned config
each (its autotuner's sweep takes longer than a device call under either compiler),
timed beside cuBLAS (`torch.matmul`) in the same process.

    python benchmarks/tutorial09_cells.py TUTORIAL.py [--sizes 8192x8192x512 ...] [--config 128x256x64x3x8]
    python -m tegula.compat benchmarks/tutorial09_cells.py TUTORIAL.py ...

The tutorial is loaded as a module, so under `python -m tegula.compat` its `import
triton` is tegula. Kernels: `naive` (matmul_kernel, one tile per program), `persistent`
(pointers, `tl.range(..., flatten=True)`), `tma` (host descriptors, one tile per
program), `tma_persistent` (host descriptors, flattened), `desc_persistent` (device
descriptors, flattened), each called through `.fn` with the config given (BM x BN x
BK x stages x warps, GROUP_SIZE_M 8, no epilogue subtiling). Each result is checked
against cuBLAS's product; prints TFLOP/s per kernel and size and the ratio to cuBLAS.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys

import torch


def load(path: str):
    spec = importlib.util.spec_from_file_location("tutorial09", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tutorial09"] = module
    spec.loader.exec_module(module)
    return module


def runners(t, triton, a, b, cfg):
    """name -> a function computing C = A @ B (B given as [N, K]) with the pinned config."""
    bm, bn, bk, stages, warps = cfg
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), device="cuda", dtype=a.dtype)
    sms = torch.cuda.get_device_properties("cuda").multi_processor_count
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    meta = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_stages=stages,
                num_warps=warps)
    bt = b.T  # [K, N] view for the pointer kernels

    def naive():
        t.matmul_kernel.fn[(tiles,)](a, bt, c, M, N, K, a.stride(0), a.stride(1), bt.stride(0), bt.stride(1),
                                     c.stride(0), c.stride(1), **meta)
        return c

    def persistent():
        t.matmul_kernel_persistent.fn[(min(sms, tiles),)](
            a, bt, c, M, N, K, a.stride(0), a.stride(1), bt.stride(0), bt.stride(1), c.stride(0), c.stride(1),
            NUM_SMS=sms, **meta)
        return c

    from triton.tools.tensor_descriptor import TensorDescriptor
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b, [bn, bk])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn])

    def tma():
        t.matmul_kernel_tma.fn[(tiles,)](a_desc, b_desc, c_desc, M, N, K, FP8_OUTPUT=False, WARP_SPECIALIZE=False,
                                         **meta)
        return c

    def tma_persistent():
        t.matmul_kernel_tma_persistent.fn[(min(sms, tiles),)](
            a_desc, b_desc, c_desc, M, N, K, FP8_OUTPUT=False, EPILOGUE_SUBTILE=False, NUM_SMS=sms,
            WARP_SPECIALIZE=False, **meta)
        return c

    def desc_persistent():
        t.matmul_kernel_descriptor_persistent.fn[(min(sms, tiles),)](
            a, b, c, M, N, K, EPILOGUE_SUBTILE=False, NUM_SMS=sms, WARP_SPECIALIZE=False, FLATTEN=True, **meta)
        return c

    return {"naive": naive, "persistent": persistent, "tma": tma, "tma_persistent": tma_persistent,
            "desc_persistent": desc_persistent}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--sizes", nargs="+", default=["8192x8192x512", "8192x8192x8192"])
    ap.add_argument("--config", default="128x256x64x3x8")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    import triton
    from triton.testing import do_bench
    who = "tegula" if getattr(triton, "__file__", "").find("tegula") >= 0 else "triton"
    t = load(args.tutorial)
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    cfg = tuple(int(x) for x in args.config.split("x"))
    for size in args.sizes:
        M, N, K = (int(x) for x in size.split("x"))
        torch.manual_seed(0)
        a = torch.randn((M, K), device="cuda", dtype=torch.float16)
        b = torch.randn((N, K), device="cuda", dtype=torch.float16)
        ref = a @ b.T
        flops = 2.0 * M * N * K
        cublas = flops / do_bench(lambda: a @ b.T) * 1e-9
        print(f"{who:7s} {size:16s} cublas           {cublas:8.1f} TFLOP/s", flush=True)
        for name, fn in runners(t, triton, a, b, cfg).items():
            if args.only and name not in args.only:
                continue
            try:
                out = fn()
                torch.cuda.synchronize()
                err = (out.float() - ref.float()).abs().max().item()
                ok = err <= 0.02 * ref.float().abs().max().item() + 0.5
                ms = do_bench(fn)
                tf = flops / ms * 1e-9
                print(f"{who:7s} {size:16s} {name:16s} {tf:8.1f} TFLOP/s  {tf / cublas:5.3f}x cuBLAS  "
                      f"{'ok' if ok else f'WRONG (max err {err:.3g})'}", flush=True)
            except Exception as e:  # one failing kernel must not hide the others
                print(f"{who:7s} {size:16s} {name:16s} failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}",
                      flush=True)


if __name__ == "__main__":
    main()
