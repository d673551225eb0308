"""How the attention forward's time splits into per-block work and per-program overhead.

The number of query tokens Z·H·N is held fixed (so the number of programs is too) while
N grows: each program then visits N / BLOCK_N key blocks, and its time is
`overhead + N / BLOCK_N · per_block`. Timing N = 2048 .. 16384 for tegula at one pinned
config and for torch SDPA, in one process, and fitting that line per column says how
much of a program is its fixed part (the Q load, the pipeline's fill, the epilogue, the
grid's last partial wave) — the part a persistent kernel would overlap.

    python3 benchmarks/attention_scaling.py --d 128 --config 128x128s2w8ws [--causal]

Also prints the CUDA kernels SDPA launches (torch.profiler), so the table says what
tegula is compared against.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOKENS = 4 * 32 * 4096  # Z·H·N of the benchmark's dense rows


def fit_line(xs, ys):
    """(intercept, slope) of the least-squares line through (xs, ys)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def sdpa_kernels(q, k, v, causal):
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages() if e.device_type.name == "CUDA"})


def main() -> int:
    import torch

    import tegula.testing
    from benchmarks.attention_bench import config_label, flops, only_config
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--config", default="128x128s2w8ws")
    ap.add_argument("--ns", default="2048,4096,8192,16384")
    args = ap.parse_args()
    module = importlib.import_module("tegula.kernels.attention")
    only_config(module, args.config)
    bench = tegula.testing.do_bench
    rows = []
    print(f"D{args.d}{' causal' if args.causal else ''} config {args.config}; Z*H*N = {TOKENS}")
    print(f"{'N':>6s} {'Z':>3s} {'teg ms':>8s} {'sdpa ms':>8s} {'teg TF':>7s} {'sdpa TF':>7s} {'ratio':>6s}")
    for n in (int(x) for x in args.ns.split(",")):
        z = max(1, TOKENS // (32 * n))
        q, k, v = (torch.randn(z, 32, n, args.d, device="cuda", dtype=torch.float16, requires_grad=True)
                   for _ in range(3))
        if n == 4096:
            print("    sdpa kernels:", "; ".join(sdpa_kernels(q, k, v, args.causal)))
        teg = bench(lambda: module.attention(q, k, v, causal=args.causal))
        ref = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=args.causal))
        f = flops(z, 32, n, args.d, args.causal)
        rows.append((n, z, teg, ref))
        print(f"{n:6d} {z:3d} {teg:8.3f} {ref:8.3f} {f / teg / 1e9:7.1f} {f / ref / 1e9:7.1f} {ref / teg:6.3f}"
              f"   ({config_label(module._fwd.best_config)})", flush=True)
    # time per program-slot = t / waves; with programs fixed, t = a + b·N (causal: b·N/2)
    for name, col in (("tegula", 2), ("sdpa", 3)):
        a, b = fit_line([r[0] for r in rows], [r[col] for r in rows])
        at4k = a + b * 4096
        print(f"{name:7s} t(N) = {a:.4f} ms + N x {b * 1e3:.4f} us: fixed part {a / at4k:.1%} of the N4096 time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
