"""Fused attention on the GPU: `tegula.kernels.attention` forward and backward, side by side.

Columns, measured in one run on the same inputs: tegula compiling the library's source;
Triton 3.6 compiling the *same source files* (tegula/kernels/*.py loaded a second time
with `tegula` and `tegula.language` resolving to `triton` and `triton.language`); torch's
`scaled_dot_product_attention` (FlashAttention; for the sliding window, torch's
FlexAttention through torch.compile). fp16, TFLOP/s with 4·Z·H·N²·D flops
forward (half for causal) and 2.5× that backward (five matmuls to two).

Rows: Z4 H32 N4096 D64/D128, causal and not; then a sliding window of 1024 at N8192
(a BlockMask) against dense causal at N8192 (the built-in causal skipping), with the
fraction of blocks the window skips and the speed-up it achieves over causal.

    python benchmarks/attention_bench.py            # the full table (autotunes: minutes)
    python benchmarks/attention_bench.py --quick    # small sizes, one config per kernel
    python benchmarks/attention_bench.py --one-config   # full sizes, narrow_configs' short list
    python benchmarks/attention_bench.py --fwd-configs 128x64s3w8 128x128s2w8   # forward per config
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.load import tegula_is_triton  # noqa: E402

KERNELS_DIR = Path(__file__).resolve().parents[1] / "tegula" / "kernels"
# dependency order: each file imports only earlier ones (and tegula's public surface)
LIBRARY_FILES = ["attention_common", "flex", "mods", "attention_configs", "attention_fwd", "attention_bwd",
                 "attention"]


def load_library_under_triton() -> ModuleType | None:
    """tegula/kernels loaded again, its `import tegula` / `tegula.language` answered by
    the real Triton: the same kernel source, compiled by Triton. None without Triton."""
    try:
        import triton.language.extra
        import triton.tools.tensor_descriptor
    except ImportError:
        return None
    package = ModuleType("tegula.kernels")
    package.__path__ = []
    with tegula_is_triton({"tegula.language.extra": triton.language.extra, "tegula.kernels": package,
                           "tegula.tools": triton.tools,
                           "tegula.tools.tensor_descriptor": triton.tools.tensor_descriptor}):
        exec_library(package, KERNELS_DIR)
    return package


def exec_library(package: ModuleType, folder: Path) -> None:
    """Run the library's files in `folder` as `tegula.kernels.*` modules of `package`, in
    dependency order (each registered in sys.modules before the next imports it)."""
    for name in LIBRARY_FILES:
        spec = importlib.util.spec_from_file_location(f"tegula.kernels.{name}", folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        setattr(package, name, module)


def narrow_configs(attention_module) -> None:
    """--quick and --one-config: keep the host configs and, for the GPU, 128 x 64 blocks
    (either way round) with 3 stages and 8 warps, so a run hardly autotunes; the forward
    also keeps 128 x 128 with 2 stages (its best at D128 on an H200), both with their
    warp-specialized twins (four forward configs timed per case)."""
    def keep(c, forward):
        blocks = sorted((c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]))
        return (blocks[1] <= 32 or (blocks == [64, 128] and c.num_stages == 3 and c.num_warps == 8)
                or (forward and blocks == [128, 128] and c.num_stages == 2 and c.num_warps == 8))
    for kernel in (attention_module._fwd, attention_module._dkdv, attention_module._dq):
        kernel.configs = [c for c in kernel.configs if keep(c, kernel is attention_module._fwd)]


def only_config(attention_module, spec: str) -> None:
    """The forward kernel narrowed to one config, `BMxBNsSTAGESwWARPS` (one of its list),
    with `ws` after it (`128x64s3w8ws`) the same config with WARP_SPECIALIZE=True, with
    `ol` after that (`128x64s3w8wsol`, `128x64s3w8ol`) with ONE_LOOP=True, and `p` last
    (`128x128s2w8wsp`) with PERSISTENT=True; `tuned`, the whole tuned list (the
    autotuner's choice)."""
    kernel = attention_module._fwd
    if not hasattr(kernel, "all_configs"):
        kernel.all_configs = list(kernel.configs)
    if spec == "tuned":
        kernel.configs = list(kernel.all_configs)
        if hasattr(kernel, "cache"):
            kernel.cache.clear()
        return
    persistent = spec.endswith("p")
    spec = spec.removesuffix("p")
    one_loop = spec.endswith("ol")
    spec = spec.removesuffix("ol")
    specialized = spec.endswith("ws")
    blocks, rest = spec.removesuffix("ws").split("s")
    bm, bn = (int(x) for x in blocks.split("x"))
    stages, warps = (int(x) for x in rest.split("w"))
    want = (bm, bn, stages, warps)
    host = [c for c in kernel.all_configs if max(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) <= 32]
    gpu = [c for c in kernel.all_configs
           if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_stages, c.num_warps) == want]
    if not gpu:
        raise ValueError(f"{spec}: not one of the forward kernel's GPU configs")
    # the list's first of those blocks, the plain one (its twins, after it, differ in the
    # flags), with the flags spelled (only those set: an older revision's kernel may lack one)
    flags = {name: True for name, on in (("WARP_SPECIALIZE", specialized), ("ONE_LOOP", one_loop),
                                         ("PERSISTENT", persistent)) if on}
    kernel.configs = host + [copy_config(gpu[0], **flags)]
    if hasattr(kernel, "cache"):
        kernel.cache.clear()  # a tuned choice of the previous spec must not be reused


def config_label(config) -> str:
    """A tuned forward config as `only_config` spells it (`128x128s2w8ws`)."""
    if config is None:
        return "?"
    kw = config.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}s{config.num_stages}w{config.num_warps}"
            f"{'ws' if kw.get('WARP_SPECIALIZE') else ''}{'ol' if kw.get('ONE_LOOP') else ''}"
            f"{'p' if kw.get('PERSISTENT') else ''}")


def print_tuning(kernel) -> None:
    """The forward's autotuning of the case just run: each config's time (ms)."""
    def ms(t):
        return t[0] if isinstance(t, (list, tuple)) else t
    timings = sorted(kernel.configs_timings.items(), key=lambda item: ms(item[1]))
    print("    fwd tuned: " + ", ".join(f"{config_label(c)} {ms(t):.3f}" for c, t in timings), flush=True)


def copy_config(config, **kwargs):
    """`config` (an autotuning Config of whichever compiler) with more kwargs."""
    import copy

    out = copy.copy(config)
    out.kwargs = {**config.kwargs, **kwargs}
    return out


def sweep_forward(specs, tegula_module, triton_lib, bench) -> int:
    """Forward only, one config at a time, Z4 H32 N4096 D64/D128 causal and not: tegula
    on its descriptor path (TMA) and its pointer path, Triton on the same source
    (descriptor path), SDPA; TFLOP/s. Then the host time of one forward call (wrapper,
    autotuner dispatch, launch; no synchronization) for tegula and Triton: a kernel
    shorter than that leaves the GPU waiting for the host."""
    import torch
    Z, H, N = 4, 32, 4096
    libs = {"tegula": tegula_module, "triton": triton_lib.attention if triton_lib else None}
    print(f"{'case':24s} {'config':12s} {'teg desc':>8s} {'teg ptr':>8s} {'triton':>8s} {'sdpa':>8s} "
          f"{'host us teg':>11s} {'triton':>7s}")
    for D in (64, 128):
        for causal in (False, True):
            q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
            f = flops(Z, H, N, D, causal)
            sdpa = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
            for spec in specs:
                cells, hosts = [], {}
                for name, descriptors in (("tegula", True), ("tegula", False), ("triton", True)):
                    module = libs[name]
                    if module is None:
                        cells.append("n/a")
                        continue
                    saved = module.forward_descriptors_apply
                    if not descriptors:
                        module.forward_descriptors_apply = lambda *tensors: False
                    try:
                        only_config(module, spec)
                        ms = bench(lambda: module.attention(q, k, v, causal=causal))
                        cells.append(f"{f / ms / 1e9:.1f}")
                        if descriptors:
                            hosts[name] = host_microseconds(lambda: module.attention(q, k, v, causal=causal))
                    except Exception as e:  # one failing cell must not hide the others
                        cells.append("fail")
                        print(f"    {name} {spec}: {type(e).__name__}: {str(e)[:160]}")
                    finally:
                        module.forward_descriptors_apply = saved
                label = f"D{D}{' causal' if causal else ''}"
                host = " ".join(f"{hosts[n]:7.1f}" if n in hosts else "    n/a" for n in ("tegula", "triton"))
                print(f"{label:24s} {spec:12s} " + " ".join(f"{c:>8s}" for c in cells) + f" {f / sdpa / 1e9:8.1f}"
                      f"     {host}", flush=True)
    return 0


def host_microseconds(call, calls: int = 30) -> float:
    """Median host time of one call, without waiting for the GPU (after a synchronize,
    so each call finds an empty queue)."""
    import statistics
    import time

    import torch
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def torch_flex_sliding_window(window: int, n: int, device):
    """torch's FlexAttention (Inductor-generated Triton) on the same window, for the
    window row's torch column; None where this torch has none."""
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def sliding_window(b, h, q, kv):
            return (q >= kv) & (q - kv < window)
        block_mask = create_block_mask(sliding_window, None, None, n, n, device=device)
        compiled = torch.compile(flex_attention)
        return lambda q, k, v: compiled(q, k, v, block_mask=block_mask)
    except Exception as e:
        print(f"    torch FlexAttention unavailable: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return None


def flops(Z, H, N, D, causal, visited=None):
    f = 4 * Z * H * N * N * D
    if visited is not None:
        return f * visited
    return f * (0.5 if causal else 1.0)


def time_fwd_bwd(run, q, k, v, bench):
    """(forward ms, backward ms) of `run(q, k, v)`; None for a pass that failed."""
    import torch
    try:
        fwd = bench(lambda: run(q, k, v))
    except Exception as e:  # one column failing must not hide the others
        print(f"    forward failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return None, None
    try:
        out = run(q, k, v)
        d_out = torch.randn_like(out)
        bwd = bench(lambda: out.backward(d_out, retain_graph=True), grad_to_none=[q, k, v])
    except Exception as e:
        print(f"    backward failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        bwd = None
    return fwd, bwd


def main(quick: bool = False, one_config: bool = False, only: str = "", fwd_configs=()) -> int:
    import importlib

    import torch

    import tegula.testing
    from tegula.kernels import create_block_mask, mods

    # the module (the package re-exports the `attention` function under the same name)
    tegula_attention_module = importlib.import_module("tegula.kernels.attention")

    if not torch.cuda.is_available():
        print("attention_bench.py measures GPU kernels: no CUDA device here")
        return 1
    triton_lib = load_library_under_triton()
    if fwd_configs:
        return sweep_forward(fwd_configs, tegula_attention_module, triton_lib, tegula.testing.do_bench)
    if quick or one_config:
        narrow_configs(tegula_attention_module)
        if triton_lib is not None:
            narrow_configs(triton_lib.attention)
    bench = tegula.testing.do_bench
    device, dtype = "cuda", torch.float16
    Z, H = (1, 4) if quick else (4, 32)
    n_dense = 1024 if quick else 4096
    n_window, window = (2048, 256) if quick else (8192, 1024)

    def sdpa(causal):
        return lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    rows = []
    for D in (64,) if quick else (64, 128):
        for causal in (False, True):
            q, k, v = (torch.randn(Z, H, n_dense, D, device=device, dtype=dtype, requires_grad=True)
                       for _ in range(3))
            label = f"Z{Z} H{H} N{n_dense} D{D}{' causal' if causal else ''}"
            if only and only not in label:
                continue
            print(f"{label} ...", flush=True)
            runs = {"tegula": lambda q, k, v, c=causal: tegula_attention_module.attention(q, k, v, causal=c),
                    "triton": (None if triton_lib is None else
                               lambda q, k, v, c=causal: triton_lib.attention.attention(q, k, v, causal=c)),
                    "sdpa": sdpa(causal)}
            err = (runs["tegula"](q, k, v) - runs["sdpa"](q, k, v)).abs().max().item()
            times = {name: (time_fwd_bwd(run, q, k, v, bench) if run else (None, None)) for name, run in runs.items()}
            print_tuning(tegula_attention_module._fwd)
            rows.append((label, flops(Z, H, n_dense, D, causal), times,
                         f"max|out - sdpa| {err:.1e}; fwd {config_label(tegula_attention_module._fwd.best_config)}"))
    if only:  # --only narrows the run to dense cases: no window rows
        print_table(rows)
        return 0

    # sliding window vs dense causal, same N: the block mask skips what the window leaves out
    D = 64 if quick else 128
    q, k, v = (torch.randn(1 if quick else 2, H, n_window, D, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))
    Zw = q.shape[0]
    mask = mods.sliding_window(window)
    block_mask = create_block_mask(mask, 1, 1, n_window, device)
    visited = block_mask.visited_fraction()
    label_w = f"Z{Zw} H{H} N{n_window} D{D} window {window}"
    print(f"{label_w} ...", flush=True)
    runs_w = {"tegula": lambda q, k, v: tegula_attention_module.attention(q, k, v, block_mask=block_mask),
              "triton": None, "sdpa": torch_flex_sliding_window(window, n_window, device)}
    if triton_lib is not None:
        try:
            bm_triton = triton_lib.flex.create_block_mask(triton_lib.mods.sliding_window(window), 1, 1, n_window,
                                                          device)
            runs_w["triton"] = lambda q, k, v: triton_lib.attention.attention(q, k, v, block_mask=bm_triton)
        except Exception as e:  # report, and keep the other columns
            print(f"    Triton could not build the block mask: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    times_w = {name: (time_fwd_bwd(run, q, k, v, bench) if run else (None, None)) for name, run in runs_w.items()}
    print_tuning(tegula_attention_module._fwd)
    config_w = config_label(tegula_attention_module._fwd.best_config)
    label_c = f"Z{Zw} H{H} N{n_window} D{D} causal"
    print(f"{label_c} ...", flush=True)
    runs_c = {"tegula": lambda q, k, v: tegula_attention_module.attention(q, k, v, causal=True),
              "triton": (None if triton_lib is None else
                         lambda q, k, v: triton_lib.attention.attention(q, k, v, causal=True)),
              "sdpa": sdpa(True)}
    times_c = {name: (time_fwd_bwd(run, q, k, v, bench) if run else (None, None)) for name, run in runs_c.items()}
    print_tuning(tegula_attention_module._fwd)
    config_c = config_label(tegula_attention_module._fwd.best_config)
    # window FLOPs: what the window's pairs cost, q - window < kv <= q
    pairs = sum(min(i + 1, window) for i in range(n_window)) / (n_window * n_window)
    rows.append((label_c, flops(Zw, H, n_window, D, True), times_c, f"fwd {config_c}"))
    rows.append((label_w, flops(Zw, H, n_window, D, False, visited=pairs), times_w,
                 f"visits {visited:.1%} of blocks (skips {1 - visited:.1%}; causal visits ~50%); fwd {config_w}"))

    print_table(rows)
    for p, pass_name in enumerate(("fwd", "bwd")):
        t_c, t_w = times_c["tegula"][p], times_w["tegula"][p]
        if t_c and t_w:
            print(f"sliding window {window} vs dense causal at N{n_window}, {pass_name}: {t_c / t_w:.2f}x faster "
                  f"(blocks visited {visited:.1%} vs ~{0.5 + 0.5 / math.ceil(n_window / 128):.1%})")
    return 0


def print_table(rows):
    def tflops(f, ms):
        return f"{f / ms / 1e9:7.1f}" if ms else "    n/a"

    def ratio(a, b):
        return f"{b / a:5.2f}" if a and b else "  n/a"

    print()
    print(f"{'case':36s} {'pass':4s} {'tegula':>7s} {'triton':>7s} {'sdpa':>7s} {'teg/tri':>7s} {'teg/sdpa':>8s}  note")
    for label, f, times, note in rows:
        for p, name in enumerate(("fwd", "bwd")):
            mult = 1.0 if p == 0 else 2.5
            t, tr, s = (times[k][p] for k in ("tegula", "triton", "sdpa"))
            print(f"{label:36s} {name:4s} {tflops(f * mult, t)} {tflops(f * mult, tr)} {tflops(f * mult, s)} "
                  f"{ratio(t, tr):>7s} {ratio(t, s):>8s}  {note if p == 0 else ''}")
    print("TFLOP/s; teg/tri and teg/sdpa are speed ratios (above 1: tegula faster). In the window row the "
          "sdpa column is torch's FlexAttention (torch.compile) on the same window.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one config per kernel: a smoke run")
    parser.add_argument("--one-config", action="store_true",
                        help="the full sizes with --quick's short config lists (hardly any autotuning)")
    parser.add_argument("--only", default="",
                        help="only the dense cases whose label contains this, e.g. 'D64 causal' (no window rows)")
    parser.add_argument("--fwd-configs", nargs="+", default=(),
                        help="forward only, each of these configs alone (BMxBNsSTAGESwWARPS, e.g. 128x64s3w8)")
    args = parser.parse_args()
    sys.exit(main(quick=args.quick, one_config=args.one_config, only=args.only, fwd_configs=args.fwd_configs))
