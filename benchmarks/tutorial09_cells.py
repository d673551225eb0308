"""Triton's tutorial 09 (persistent matmul) kernels, unmodified, at one pinned config
each (its autotuner's sweep takes longer than a device call under either compiler),
timed beside cuBLAS (`torch.matmul`) in the same process.

    python benchmarks/tutorial09_cells.py TUTORIAL.py [--sizes 8192x8192x512 ...] [--config 128x256x64x3x8]
                                          [--dtype fp8]
    python -m tegula.compat benchmarks/tutorial09_cells.py TUTORIAL.py ...

The tutorial is loaded as a module, so under `python -m tegula.compat` its `import
triton` is tegula. Kernels: `naive` (matmul_kernel, one tile per program), `persistent`
(pointers, `tl.range(..., flatten=True)`), `tma` (host descriptors, one tile per
program), `tma_persistent` (host descriptors, flattened), `desc_persistent` (device
descriptors, flattened) and `desc_persistent_nested` (the same, `FLATTEN=False`: the
pipeline drains at every tile), `tma_persistent_ws` / `desc_persistent_ws` (flattened
and warp-specialized: Triton 3.6 does not specialize a flattened loop on Hopper, so its
rows are its plain pipelined kernel), each called through `.fn` with the config given (BM x BN x
BK x stages x warps, GROUP_SIZE_M 8, no epilogue subtiling). Each result is checked
against cuBLAS's product; prints TFLOP/s per kernel and size and the ratio to cuBLAS.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
from benchmarks.load import import_file  # noqa: E402


def load(path: str):
    return import_file("tutorial09", path)


def row_major_kernel(triton, tl):
    """Tutorial 09's device-descriptor persistent kernel with tiles in row-major order
    (two divisions by loop invariants a tile instead of `_compute_pid`'s grouping,
    whose group size varies): how much the flat loop's scalar work costs."""
    @triton.jit
    def desc_persistent_row_major(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                                  BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                                  GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr):
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K],
                                           strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K],
                                           strides=[K, 1], block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N],
                                           strides=[N, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        num_tiles = tl.cdiv(M, BLOCK_SIZE_M) * num_pid_n
        for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
            pid_m = tile_id // num_pid_n
            pid_n = tile_id % num_pid_n
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for ki in range(tl.cdiv(K, BLOCK_SIZE_K)):
                a = a_desc.load([pid_m * BLOCK_SIZE_M, ki * BLOCK_SIZE_K])
                b = b_desc.load([pid_n * BLOCK_SIZE_N, ki * BLOCK_SIZE_K])
                accumulator = tl.dot(a, b.T, accumulator)
            c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], accumulator.to(tl.float16))
    return desc_persistent_row_major


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
    fp8_out = a.dtype == torch.float8_e4m3fn  # the tutorial's --prec fp8 writes C in fp8 too

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
        t.matmul_kernel_tma.fn[(tiles,)](a_desc, b_desc, c_desc, M, N, K, FP8_OUTPUT=fp8_out, WARP_SPECIALIZE=False,
                                         **meta)
        return c

    def tma_persistent():
        t.matmul_kernel_tma_persistent.fn[(min(sms, tiles),)](
            a_desc, b_desc, c_desc, M, N, K, FP8_OUTPUT=fp8_out, EPILOGUE_SUBTILE=False, NUM_SMS=sms,
            WARP_SPECIALIZE=False, **meta)
        return c

    def desc_persistent():
        t.matmul_kernel_descriptor_persistent.fn[(min(sms, tiles),)](
            a, b, c, M, N, K, EPILOGUE_SUBTILE=False, NUM_SMS=sms, WARP_SPECIALIZE=False, FLATTEN=True, **meta)
        return c

    def tma_persistent_ws():
        t.matmul_kernel_tma_persistent.fn[(min(sms, tiles),)](
            a_desc, b_desc, c_desc, M, N, K, FP8_OUTPUT=fp8_out, EPILOGUE_SUBTILE=False, NUM_SMS=sms,
            WARP_SPECIALIZE=True, **meta)
        return c

    def desc_persistent_ws():
        t.matmul_kernel_descriptor_persistent.fn[(min(sms, tiles),)](
            a, b, c, M, N, K, EPILOGUE_SUBTILE=False, NUM_SMS=sms, WARP_SPECIALIZE=True, FLATTEN=True, **meta)
        return c

    def desc_persistent_nested():
        t.matmul_kernel_descriptor_persistent.fn[(min(sms, tiles),)](
            a, b, c, M, N, K, EPILOGUE_SUBTILE=False, NUM_SMS=sms, WARP_SPECIALIZE=False, FLATTEN=False, **meta)
        return c

    import triton.language as tl
    row_major = row_major_kernel(triton, tl)

    def desc_persistent_row_major():
        row_major[(min(sms, tiles),)](a, b, c, M, N, K, NUM_SMS=sms, **meta)
        return c

    return {"naive": naive, "persistent": persistent, "tma": tma, "tma_persistent": tma_persistent,
            "desc_persistent": desc_persistent, "desc_persistent_nested": desc_persistent_nested,
            "desc_persistent_row_major": desc_persistent_row_major, "tma_persistent_ws": tma_persistent_ws,
            "desc_persistent_ws": desc_persistent_ws}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--sizes", nargs="+", default=["8192x8192x512", "8192x8192x8192"])
    ap.add_argument("--config", default="128x256x64x3x8")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--dtype", choices=["fp16", "fp8"], default="fp16",
                    help="fp8: A, B and C float8_e4m3fn (the tutorial's --prec fp8), cuBLAS through torch._scaled_mm")
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
        fp8 = args.dtype == "fp8"
        dtype = torch.float8_e4m3fn if fp8 else torch.float16
        scale = 0.25 if fp8 else 1.0  # fp8 products summed over K stay far inside e4m3's range (448)
        a = (torch.randn((M, K), device="cuda", dtype=torch.float16) * scale).to(dtype)
        b = (torch.randn((N, K), device="cuda", dtype=torch.float16) * scale).to(dtype)
        ref = (a.float() @ b.float().T) if fp8 else a @ b.T
        flops = 2.0 * M * N * K
        if fp8:
            one = torch.tensor(1.0, device="cuda")
            cublas = flops / do_bench(lambda: torch._scaled_mm(a, b.T, scale_a=one, scale_b=one,
                                                                out_dtype=torch.float16)) * 1e-9
        else:
            cublas = flops / do_bench(lambda: a @ b.T) * 1e-9
        print(f"{who:7s} {size:16s} cublas           {cublas:8.1f} TFLOP/s", flush=True)
        for name, fn in runners(t, triton, a, b, cfg).items():
            if args.only and name not in args.only:
                continue
            if who == "triton" and name.endswith("_ws"):
                continue  # flatten + warp_specialize: the tutorial says Triton does not do it on Hopper
            try:
                out = fn()
                torch.cuda.synchronize()
                diff = (out.float() - ref.float()).abs()
                err = diff.max().item()
                if fp8:  # e4m3 keeps 3 mantissa bits (an output within one step of the sum), and Hopper's
                    # fp8 tensor cores accumulate with fewer bits than f32
                    ok = bool((diff <= ref.float().abs() / 8 + 0.25).all())
                else:
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
