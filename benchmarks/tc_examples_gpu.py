"""Tensor-core examples on the GPU: grouped GEMM, fp8 scaled matmul, split-K, side by side.

Columns, measured in one run on the same inputs: tegula compiling an example's source
(examples/09_grouped_gemm.py, 10_fp8_scaled_matmul.py, 11_split_k_matmul.py); Triton
3.6 compiling the *same file* (loaded a second time with `tegula` / `tegula.language`
resolving to `triton` / `triton.language`); a torch baseline (torch.matmul per problem
for the grouped GEMM, torch._scaled_mm for fp8, torch.matmul for split-K). TFLOP/s and
tegula's speed ratios; each row also checks tegula's result against torch's. A row that
fails prints its error and the next row runs.

    python benchmarks/tc_examples_gpu.py            # the full table (autotunes: minutes)
    python benchmarks/tc_examples_gpu.py --quick    # small sizes, one config per kernel
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.load import tegula_is_triton  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STEMS = {"grouped": "09_grouped_gemm", "fp8": "10_fp8_scaled_matmul", "split_k": "11_split_k_matmul"}


def _exec(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_example(stem: str, under_triton: bool) -> ModuleType | None:
    """examples/<stem>.py as tegula code, or (under_triton) with its `import tegula` /
    `import tegula.language` answered by the real Triton; None without Triton."""
    if not under_triton:
        return _exec(f"tc_{stem}_tegula", EXAMPLES / f"{stem}.py")
    try:
        import triton  # noqa: F401
    except ImportError:
        return None
    with tegula_is_triton():
        return _exec(f"tc_{stem}_triton", EXAMPLES / f"{stem}.py")


def one_config(module: ModuleType) -> None:
    """--quick: every autotuned kernel of the module keeps its first config only."""
    for value in vars(module).values():
        if hasattr(value, "configs") and hasattr(value, "fn") and len(value.configs) > 1:
            value.configs = value.configs[:1]


def bench_grouped_gemm(mods, bench, quick):
    import torch
    gen = torch.Generator().manual_seed(0)  # the same group for every column
    pick = lambda lo, hi: int(torch.randint(lo, hi, (), generator=gen))  # noqa: E731
    groups = 4 if quick else 16
    shapes = [(pick(256, 2048 if quick else 4096), 8 * pick(32, 256 if quick else 512),
               8 * pick(32, 256 if quick else 512)) for _ in range(groups)]
    group_a = [torch.randn((m, k), device="cuda", dtype=torch.float16) for m, n, k in shapes]
    group_b = [torch.randn((k, n), device="cuda", dtype=torch.float16) for m, n, k in shapes]
    flops = sum(2 * m * n * k for m, n, k in shapes)
    torch_run = lambda: [a @ b for a, b in zip(group_a, group_b)]  # noqa: E731
    for descriptors in (False, True):
        label = f"grouped {groups} problems, {'descriptors' if descriptors else 'pointer tables'}"
        runs = {who: (None if m is None else
                      lambda m=m, d=descriptors: m.grouped_gemm(group_a, group_b, use_descriptors=d))
                for who, m in mods.items()}
        def check(run=runs["tegula"]):
            err = max((c.float() - e.float()).abs().max().item() for c, e in zip(run(), torch_run()))
            return f"max|tegula - torch| {err:.2g}"
        yield label, flops, runs, torch_run, check


def bench_fp8(mods, bench, quick):
    import torch
    ex = mods["tegula"]
    for size in (1024,) if quick else (4096, 8192):
        m = n = k = size
        a = torch.randn((m, k), device="cuda")
        b_nk = torch.randn((n, k), device="cuda")
        for granularity in ("per-tensor", "per-row/col"):
            dim = None if granularity == "per-tensor" else 1
            a_fp8, sa = ex.quantize(a, dim)
            b_nk_fp8, sb = ex.quantize(b_nk, dim)
            b_fp8 = b_nk_fp8.t()
            out = torch.bfloat16
            runs = {who: (None if mod is None else
                          lambda mod=mod: mod.fp8_scaled_matmul(a_fp8, b_fp8, sa, sb, out))
                    for who, mod in mods.items()}
            # torch wants per-tensor scales as one-element tensors, row-wise ones as M x 1 and 1 x N
            tsa, tsb = (sa.reshape(()), sb.reshape(())) if dim is None else (sa.reshape(-1, 1), sb.reshape(1, -1))
            torch_run = None
            if hasattr(torch, "_scaled_mm"):
                torch_run = lambda: torch._scaled_mm(a_fp8, b_fp8, scale_a=tsa, scale_b=tsb,  # noqa: E731
                                                     out_dtype=out)
                try:
                    torch_run()
                except Exception as e:  # e.g. row-wise scales on an older torch: keep the row
                    print(f"    torch._scaled_mm unavailable here: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                    torch_run = None
            else:
                print("    torch._scaled_mm unavailable in this torch: no torch column")
            def check(run=runs["tegula"], a_fp8=a_fp8, b_fp8=b_fp8, sa=sa, sb=sb):
                ref = ex.reference(a_fp8, b_fp8, sa, sb)
                return f"max err / max|C| {((run().double() - ref).abs().max() / ref.abs().max()).item():.1e}"
            yield f"fp8 {m}x{n}x{k} {granularity} bf16", 2 * m * n * k, runs, torch_run, check


def bench_split_k(mods, bench, quick):
    import torch
    shapes = [(256, 256, 8192, 8)] if quick else [(512, 512, 16384, 8), (128, 256, 32768, 16), (64, 64, 65536, 32)]
    for m, n, k, split_k in shapes:
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        for variant in ("atomic", "workspace"):
            fn = "split_k_matmul_atomic" if variant == "atomic" else "split_k_matmul_workspace"
            runs = {who: (None if mod is None else lambda mod=mod: getattr(mod, fn)(a, b, split_k))
                    for who, mod in mods.items()}
            def check(run=runs["tegula"], a=a, b=b):
                return f"max|tegula - fp32| {(run().float() - a.float() @ b.float()).abs().max().item():.2g}"
            yield f"split-K {m}x{n}x{k} S{split_k} {variant}", 2 * m * n * k, runs, lambda a=a, b=b: a @ b, check


def time_or_none(bench, run):
    if run is None:
        return None
    try:
        return bench(run)
    except Exception as e:  # one column failing keeps the others
        print(f"    {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
        return None


def main(quick: bool = False, only: tuple[str, ...] = tuple(STEMS)) -> int:
    try:
        import torch
    except ImportError:
        print("tc_examples_gpu.py compares against torch: pip install torch")
        return 1
    if not torch.cuda.is_available():
        print("tc_examples_gpu.py measures GPU kernels: no CUDA device here")
        return 1
    import tegula.testing
    bench = tegula.testing.do_bench
    benches = {"grouped": bench_grouped_gemm, "fp8": bench_fp8, "split_k": bench_split_k}
    rows = []
    for name in only:
        print(f"{STEMS[name]} ...", flush=True)
        try:
            mods = {"tegula": load_example(STEMS[name], False), "triton": load_example(STEMS[name], True)}
            if mods["triton"] is None:
                print("    no Triton installed: no triton column")
            if quick:
                for mod in mods.values():
                    if mod is not None:
                        one_config(mod)
            cases = benches[name](mods, bench, quick)
            while True:
                try:
                    label, flops, runs, torch_run, check = next(cases)
                except StopIteration:
                    break
                except Exception:  # this row could not even be set up: say why, go on
                    traceback.print_exc(limit=3)
                    break
                print(f"  {label} ...", flush=True)
                try:
                    note = check()
                except Exception as e:  # a failing check is reported in the row, the timings still run
                    note = f"check failed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
                times = {who: time_or_none(bench, run) for who, run in runs.items()}
                times["torch"] = time_or_none(bench, torch_run)
                rows.append((label, flops, times, note))
                print_row(*rows[-1])
        except Exception:  # e.g. the example failed to load under one compiler
            traceback.print_exc(limit=3)
    print()
    print_header()
    for row in rows:
        print_row(*row)
    print("TFLOP/s; teg/tri and teg/torch are speed ratios (above 1: tegula faster); n/a: no value "
          "(not installed or failed, see above).")
    return 0


def print_header():
    print(f"{'case':44s} {'tegula':>7s} {'triton':>7s} {'torch':>7s} {'teg/tri':>7s} {'teg/torch':>9s}  check")


def print_row(label, flops, times, note):
    def tflops(ms):
        return f"{flops / ms / 1e9:7.1f}" if ms else "    n/a"

    def ratio(a, b):
        return f"{b / a:.2f}" if a and b else "n/a"

    t, tr, to = times.get("tegula"), times.get("triton"), times.get("torch")
    print(f"{label:44s} {tflops(t)} {tflops(tr)} {tflops(to)} {ratio(t, tr):>7s} {ratio(t, to):>9s}  {note}",
          flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one config per kernel: a smoke run")
    parser.add_argument("--only", nargs="+", choices=list(STEMS), default=list(STEMS), help="which examples")
    args = parser.parse_args()
    sys.exit(main(quick=args.quick, only=tuple(args.only)))
