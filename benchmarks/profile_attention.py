"""The attention library's forward, one case and one config, run for a profiler and for
its SASS: the call runs once (compiling), then once more between `cudaProfilerStart` /
`cudaProfilerStop`, so that `ncu --profile-from-start off` sees only the second; the
kernel's cubin is written to --sass-dir (cuobjdump -sass it there) when asked; `--bench`
also times it against SDPA, and `--window W` times a sliding window of W against dense
causal instead (the speed-up and the ideal one).

    ncu --profile-from-start off --kernel-name regex:attention_fwd --launch-count 1 ... \\
        python3 benchmarks/profile_attention.py --d 128 [--causal] [--config 128x64s3w8]
    python3 benchmarks/profile_attention.py --d 128 --sass-dir /tmp/sass

Knobs (TEGULA_WGMMA_WAIT_AT_USE, TEGULA_TMA_RELEASE_BY_ARRIVAL, ...) come from the
environment, as everywhere.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import importlib

    import torch

    from benchmarks.attention_bench import only_config
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--config", default="128x64s3w8")
    ap.add_argument("--z", type=int, default=4)
    ap.add_argument("--h", type=int, default=32)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--sass-dir")
    ap.add_argument("--bench", action="store_true", help="also time the forward and check it against SDPA")
    ap.add_argument("--window", type=int, default=0,
                    help="instead: time the forward with a sliding window of this size against dense causal")
    ap.add_argument("--device", default="cuda", help="where --window runs (cpu: a small dry run of the script)")
    args = ap.parse_args()
    if args.window:
        return window_vs_causal(args)
    # the module, not the `attention` function the package re-exports under its name
    attention_module = importlib.import_module("tegula.kernels.attention")
    only_config(attention_module, args.config)
    q, k, v = (torch.randn(args.z, args.h, args.n, args.d, device="cuda", dtype=torch.float16) for _ in range(3))
    attention_module.attention(q, k, v, causal=args.causal)  # tuning (one config) and compiling
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    attention_module.attention(q, k, v, causal=args.causal)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    kernel = attention_module._fwd
    if args.bench:
        import tegula
        out = attention_module.attention(q, k, v, causal=args.causal)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
        ms = tegula.testing.do_bench(lambda: attention_module.attention(q, k, v, causal=args.causal))
        sdpa = tegula.testing.do_bench(
            lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=args.causal))
        flops = 4 * args.z * args.h * args.n * args.n * args.d * (0.5 if args.causal else 1.0)
        print(f"forward {flops / ms / 1e9:.1f} TFLOP/s, SDPA {flops / sdpa / 1e9:.1f} "
              f"(ratio {sdpa / ms:.3f}); max|out - sdpa| {(out - want).abs().max().item():.2e}")
    best = getattr(kernel, "best_config", None)
    print("profiled", f"D{args.d}{' causal' if args.causal else ''}", "config", best)
    if args.sass_dir:
        out = Path(args.sass_dir)
        out.mkdir(parents=True, exist_ok=True)
        for i, compiled in enumerate(_compiled_kernels(kernel)):
            if "cubin" in compiled.asm:
                (out / f"attention_fwd_{i}.cubin").write_bytes(compiled.asm["cubin"])
                (out / f"attention_fwd_{i}.ptx").write_text(compiled.asm["ptx"])
    return 0


def window_vs_causal(args) -> int:
    """The forward with a sliding-window block mask against the dense causal forward (same
    config, same inputs): TFLOP/s of each and the speed-up against the ideal one (the
    fraction of blocks causal visits over the window's)."""
    import importlib
    import math

    import torch

    import tegula
    from benchmarks.attention_bench import only_config
    from tegula.kernels import create_block_mask, mods
    attention_module = importlib.import_module("tegula.kernels.attention")
    only_config(attention_module, args.config)
    q, k, v = (torch.randn(args.z, args.h, args.n, args.d, device=args.device, dtype=torch.float16)
               for _ in range(3))
    block_mask = create_block_mask(mods.sliding_window(args.window), 1, 1, args.n, args.device)
    window = tegula.testing.do_bench(lambda: attention_module.attention(q, k, v, block_mask=block_mask))
    causal = tegula.testing.do_bench(lambda: attention_module.attention(q, k, v, causal=True))
    pairs = sum(min(i + 1, args.window) for i in range(args.n)) / (args.n * args.n)
    dense = 4 * args.z * args.h * args.n * args.n * args.d
    visited, causal_visited = block_mask.visited_fraction(), 0.5 + 0.5 / math.ceil(args.n / 128)
    ideal = causal_visited / visited
    print(f"window {args.window}: {dense * pairs / window / 1e9:.1f} TFLOP/s, causal {dense * 0.5 / causal / 1e9:.1f}; "
          f"{causal / window:.2f}x faster, ideal {ideal:.2f}x ({causal / window / ideal:.2f} of it)")
    return 0


def _compiled_kernels(kernel):
    """The compiled kernels an autotuned jit function holds (its in-memory cache)."""
    fn = getattr(kernel, "fn", kernel)
    for compiled in fn.kernel_cache.values():
        if hasattr(compiled, "asm"):
            yield compiled


if __name__ == "__main__":
    sys.exit(main())
