"""The tensor-descriptor matmul (TMA on Hopper) against the pointer matmul, under tegula
and under the real Triton, side by side in one run, with results checked against
torch.matmul first (GPU only).

    python benchmarks/desc_matmul_gpu.py [--sizes 4096 3000 8192] [--dtype float16]
                                         [--config 128 256 64 3 8] [--ws]

Both kernels are `benchmarks/kernels.py`'s (`matmul_kernel`, `matmul_desc_kernel`, the
same grouped tile order and config). Printed per size: TFLOP/s of each and the ratios
tegula/triton (same kernel) and descriptor/pointer (same compiler). With `--ws` the
descriptor kernel runs with `WARP_SPECIALIZE=True` too (a producer warpgroup issues
the TMA copies; under tegula only with `TEGULA_WARP_SPECIALIZE=1`, else the hint is
ignored). cuBLAS (torch.matmul) is timed beside them.
Triton needs an allocator for device-side descriptors (`triton.set_allocator`); tegula
encodes their tensor maps on the host and needs none.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.load import load_tegula_kernels, load_triton_kernels  # noqa: E402


def matmul_runner(mod, kind: str, a, b, c, cfg):
    """A launch of `mod`'s matmul (`kind`: "ptr" the pointer kernel, "desc" the
    descriptor one, "ws" that warp-specialized) computing c = a @ b, `cfg` =
    (BM, BN, BK, stages, warps), as a zero-argument function for timing."""
    bm, bn, bk, stages, warps = cfg
    m, k = a.shape
    n = b.shape[1]
    grid = (_cdiv(m, bm) * _cdiv(n, bn),)
    if kind != "ptr":
        return lambda: mod.matmul_desc_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                                                    BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                                    WARP_SPECIALIZE=kind == "ws",
                                                    num_warps=warps, num_stages=stages)
    return lambda: mod.matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                           c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                           GROUP_M=8, num_warps=warps, num_stages=stages)


def checked_runner(mod, a, b, cfg, ref, atol: float, label: str, env: dict | None = None):
    """`matmul_runner(mod, "ptr", ...)` into a fresh C, run once — compiling, with `env`
    set meanwhile for knobs read at compile time — and its result checked against `ref`
    (largest error below `atol`, `label` naming it when not)."""
    c = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=a.dtype)
    f = matmul_runner(mod, "ptr", a, b, c, cfg)
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        f()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    torch.cuda.synchronize()
    assert (c.float() - ref).abs().max().item() < atol, label
    return f


def _cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", type=int, default=[4096, 3000, 8192])
    p.add_argument("--dtype", default="float16")
    p.add_argument("--config", nargs=5, type=int, default=(128, 256, 64, 3, 8))
    p.add_argument("--ws", action="store_true")
    args = p.parse_args()
    kinds = ("ptr", "desc", "ws") if args.ws else ("ptr", "desc")
    cfg = tuple(args.config)
    import tegula.testing

    who = {"tegula": load_tegula_kernels()}
    triton_mod = load_triton_kernels()
    if triton_mod is not None:
        import triton
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        who["triton"] = triton_mod
    dtype = getattr(torch, args.dtype)
    print(f"matmul {args.dtype} config {cfg}; TFLOP/s")
    for size in args.sizes:
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        ref = torch.matmul(a, b)
        row = {}
        for name, mod in who.items():
            for kind in kinds:
                c = torch.empty(size, size, device="cuda", dtype=dtype)
                run = matmul_runner(mod, kind, a, b, c, cfg)
                try:
                    run()
                except Exception as e:  # Triton may refuse a warp-specialized loop on Hopper
                    print(f"  {name} {kind}: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}")
                    continue
                torch.testing.assert_close(c, ref, atol=0.125, rtol=0.02)
                ms = tegula.testing.do_bench(run)
                row[(name, kind)] = 2 * size ** 3 / ms / 1e9
        # cuBLAS beside every row: ratios to it are read within this process
        ms = tegula.testing.do_bench(lambda: torch.matmul(a, b))
        row[("cublas", "")] = 2 * size ** 3 / ms / 1e9
        cells = " ".join(f"{n}{'_' + k if k else ''}={v:7.1f}" for (n, k), v in row.items())
        ratios = []
        for (n1, k1), (n2, k2) in ((("tegula", "desc"), ("tegula", "ptr")), (("tegula", "desc"), ("triton", "desc")),
                                   (("tegula", "ptr"), ("triton", "ptr")), (("tegula", "ws"), ("tegula", "desc")),
                                   (("tegula", "ws"), ("triton", "desc")), (("tegula", "ws"), ("triton", "ws")),
                                   (("tegula", "ws"), ("cublas", "")), (("tegula", "desc"), ("cublas", ""))):
            if (n1, k1) in row and (n2, k2) in row:
                ratios.append(f"{n1}_{k1}/{n2}{'_' + k2 if k2 else ''}={row[(n1, k1)] / row[(n2, k2)]:.3f}")
        print(f"{size:6d} {cells}\n       {'  '.join(ratios)}")


if __name__ == "__main__":
    main()
