"""Kernels whose sizes the compiler does not know (`dynamic_kernels.py`: Inductor's mm
template and looped reductions as Inductor writes them under dynamic shapes), timed
under Triton 3.6, under tegula, and under tegula with one version
(`TEGULA_ALIGNMENT_VERSIONS=0`: no alignment versions), in one process.

    PYTHONPATH=. python3 benchmarks/dynamic_shapes_gpu.py [--sizes 3000,4096,3001]

A size that is a multiple of 8 takes the aligned version (16-byte copies); 3001 the
other one. Prints µs, TFLOP/s for the matmuls, and the ratios against Triton.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402 (the real Triton's timer, for all three)

from benchmarks.load import import_file, triton_is_tegula  # noqa: E402

KERNELS = Path(__file__).with_name("dynamic_kernels.py")
MM_CONFIGS = [(128, 128, 64, 3, 4), (128, 256, 64, 3, 8), (64, 128, 128, 4, 4)]
REDUCTION_CONFIGS = [(1, 1024, 4), (1, 2048, 8)]


def _load():
    """Triton's copy, tegula's, and tegula's compiled with one version (the knob is read
    when a kernel compiles: the third copy's kernels are compiled with it off)."""
    import triton  # noqa: F401 (the real one, first)

    mods = {"triton": import_file("dynamic_kernels_triton", KERNELS)}
    with triton_is_tegula():
        mods["tegula"] = import_file("dynamic_kernels_tegula", KERNELS)
        mods["tegula one version"] = import_file("dynamic_kernels_tegula_one", KERNELS)
    return mods


def _first(mods, who, launch) -> None:
    """The first launch, which compiles: the third copy's with the knob off."""
    from tegula.config import knobs

    knobs.alignment_versions = who != "tegula one version"
    try:
        launch(mods[who])
    finally:
        knobs.alignment_versions = True


def _matmul(mods, size: int, cfg) -> dict[str, float]:
    bm, bn, bk, s, w = cfg
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    grid = (((size + bm - 1) // bm) * ((size + bn - 1) // bn),)
    times = {}
    for who in mods:
        c = torch.empty(size, size, device="cuda", dtype=torch.float16)

        def launch(m):
            m.triton_mm[grid](a, b, c, size, size, size, EVEN_K=False, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                              GROUP_M=8, num_warps=w, num_stages=s)
        _first(mods, who, launch)
        torch.cuda.synchronize()
        err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-2, (who, size, cfg, err)
        times[who] = do_bench(lambda: launch(mods[who]), warmup=50, rep=300)
    return times


def _reduction(mods, which: str, cols: int, cfg) -> dict[str, float]:
    xb, rb, nw = cfg
    rows = 8192
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    w = torch.randn(cols, device="cuda", dtype=torch.float16)
    b = torch.randn(cols, device="cuda", dtype=torch.float16)
    grid = ((rows + xb - 1) // xb,)
    if which == "layer norm":
        ref = torch.nn.functional.layer_norm(x.float(), (cols,), w.float(), b.float())
    else:
        ref = (x.float() ** 2).mean(-1)
    times = {}
    for who in mods:
        rstd, y, ms = torch.empty(rows, device="cuda"), torch.empty_like(x), torch.empty(rows, device="cuda")

        def launch(m):
            if which == "layer norm":
                m.ln_kernel[grid](rstd, x, w, b, y, cols, rows, cols, XBLOCK=xb, R0_BLOCK=rb, num_warps=nw)
            else:
                m.rms_kernel[grid](x, ms, cols, rows, cols, XBLOCK=xb, R0_BLOCK=rb, num_warps=nw)
        _first(mods, who, launch)
        torch.cuda.synchronize()
        got = y.float() if which == "layer norm" else ms
        err = (got - ref).abs().max().item()
        assert err < 2e-2, (who, which, cols, cfg, err)
        times[who] = do_bench(lambda: launch(mods[who]), warmup=25, rep=100)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="3000,4096,3001")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    mods = _load()
    rows = []
    for size in sizes:
        for cfg in MM_CONFIGS:
            t = _matmul(mods, size, cfg)
            flops = 2.0 * size ** 3
            rows.append((f"mm {size}³ {'x'.join(map(str, cfg[:3]))} s{cfg[3]} w{cfg[4]}",
                         {k: f"{v * 1e3:.1f} ({flops / v / 1e9:.0f})" for k, v in t.items()}, t))
        for which in ("layer norm", "rms"):
            for cfg in REDUCTION_CONFIGS:
                t = _reduction(mods, which, size, cfg)
                rows.append((f"{which} 8192x{size} {cfg}", {k: f"{v * 1e3:.1f}" for k, v in t.items()}, t))
    print("| kernel | Triton µs (TFLOP/s) | tegula | tegula one version | tegula/Triton | versions gain |")
    print("|---|---|---|---|---|---|")
    for name, shown, t in rows:
        print(f"| {name} | {shown['triton']} | {shown['tegula']} | {shown['tegula one version']} | "
              f"{t['triton'] / t['tegula']:.2f} | {t['tegula one version'] / t['tegula']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
