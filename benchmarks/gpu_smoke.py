"""GPU smoke test of the CUDA backend, for the GPU machine: compiles the hand-built tile-IR
kernels of `tests/backends/cuda/cuda_kernels.py` for the local GPU, runs them on torch
CUDA tensors through the backend's own driver and launcher, compares each with the
reference interpreter (or its numpy reference), and prints a table; then a few timings
(vector add and softmax bandwidth against torch, host time per launch against a raw
`cuLaunchKernel`), measured side by side in this run.

    python3 benchmarks/gpu_smoke.py [LOG_PATH] [--no-perf] [--isolate] [--case NAME]

Every case runs inside try/except; tracebacks go to LOG_PATH (default
gpu_smoke.log). A fault that poisons the CUDA context (an illegal address...) would fail
every later case, so from then on (or from the start with --isolate) each case runs in
its own process (`--case NAME`). The exit status is 1 when any case failed.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "backends", "cuda"))

import cuda_kernels as ck  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from gpu_runner import compare, expected, run_case  # noqa: E402

from tegula.backends.cuda import compile_kernel, driver  # noqa: E402
from tegula.backends.cuda.launcher import make_launcher  # noqa: E402
from tegula.errors import OutOfBoundsError  # noqa: E402
from tegula.ir.core import ArgAttrs  # noqa: E402

STICKY = ("ILLEGAL", "LAUNCH_FAILED", "MISALIGNED", "HARDWARE", "ASSERT", "context is destroyed")


def _isolated(name: str, log_path: str) -> tuple[str, dict]:
    """Run one case in a child process (a poisoned context cannot spread)."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), log_path + "." + name, "--no-perf",
                           "--case", name], capture_output=True, text=True, timeout=600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(f"STATUS\t{name}\t")), "")
    if not line:
        return f"ERROR child exited {proc.returncode}: {proc.stderr[-200:]}", {}
    return line.split("\t", 2)[2], {}


def correctness(log, only: str = "", isolate: bool = False, log_path: str = "") -> int:
    rows, failures = [], 0
    cases = ck.all_cases()
    for case in cases + ["oob-checked"]:
        name = case if isinstance(case, str) else case.name
        if only and name != only:
            continue
        if isolate:
            status, info = _isolated(name, log_path)
            if not status.startswith("ok"):
                failures += 1
                log.write(f"=== {name}: {status} (details in {log_path}.{name})\n")
            rows.append((name, status, info))
            print(f"{name:34s} {'':>5} {'':>6} {'':>7} {'':>7} {'':>8}  {status[:150]}", flush=True)
            continue
        try:
            if name == "oob-checked":
                try:
                    run_case(ck.out_of_bounds(), torch, debug=True)
                    status, info = "FAIL: no OutOfBoundsError", {}
                except OutOfBoundsError as e:
                    status, info = ("ok" if "offset 100" in str(e) else f"FAIL: {e}"), {}
            elif name == "device_print":
                _got, info = run_case(ck.device_print(), torch)
                torch.cuda.synchronize()
                status = "ok (see stdout)"
            else:
                got, info = run_case(case, torch, timing=True)
                problems = compare(case, got, expected(case))
                status = "ok" if not problems else "MISMATCH " + "; ".join(problems)
        except Exception as e:  # one case must not stop the others
            status, info = f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:120]}", {}
            log.write(f"=== {name}\n{traceback.format_exc()}\n")
            if any(k in str(e) for k in STICKY) and not only:
                print(f"{name:34s} {status[:150]}\n(the CUDA context is gone: the other cases run isolated)")
                rows.append((name, status, info))
                rest = [c for c in cases + ["oob-checked"]
                        if (c if isinstance(c, str) else c.name) not in {r[0] for r in rows}]
                more = 0
                for c in rest:
                    n = c if isinstance(c, str) else c.name
                    more += correctness(log, only=n, isolate=True, log_path=log_path)
                total = len(rows) + len(rest)
                print(f"\n{total - failures - 1 - more}/{total} cases ok")
                return failures + 1 + more
        if not status.startswith("ok"):
            failures += 1
            log.write(f"=== {name}: {status}\n")
        rows.append((name, status, info))
        print(f"{name:34s} {info.get('n_regs', '-')!s:>5} {info.get('n_spills', '-')!s:>6} "
              f"{info.get('shared', '-')!s:>7} {info.get('compile_s', 0):7.3f} "
              f"{info.get('host_launch_us', 0):8.2f}  {status[:150]}", flush=True)
        if only:
            print(f"STATUS\t{name}\t{status}", flush=True)
    if not only:
        print(f"\n{len(rows) - failures}/{len(rows)} cases ok")
    return failures


def _bench(fn, reps: int = 50) -> float:
    """Median milliseconds of `fn` on the GPU (events)."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def _load(case, aligned_args=()):
    """(launch, metadata, CUfunction) of a case compiled for this GPU."""
    for i in aligned_args:
        case.kernel.arg_attrs[i] = ArgAttrs(16)
    dev = torch.cuda.current_device()
    asm, md = compile_kernel(case.kernel, {"num_warps": case.num_warps}, driver.capability(dev))
    mod, fn = driver.load_function(asm["cubin"], md["name"], dev, md["shared"])
    launch = make_launcher(fn, md, md["arg_types"], dev)
    launch._keep = mod
    return launch, md, fn


def perf(log) -> None:
    print("\n--- timings (same run, same GPU:", torch.cuda.get_device_name(), ")")
    for n in (1 << 20, 1 << 24, 1 << 27):
        try:
            case = ck.vector_add(block=1024, n=n)
            launch, md, _fn = _load(case, aligned_args=(3,))
            x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            out = torch.empty_like(x)
            grid = ((n + 1023) // 1024, 1, 1)
            t_us = _bench(lambda: launch(grid, [x, y, out, n]))
            t_torch = _bench(lambda: torch.add(x, y, out=out))
            t_copy = _bench(lambda: out.copy_(x))
            launch(grid, [x, y, out, n])
            ok = torch.allclose(out, x + y)
            gbs = lambda ms, k: k * n * 4 / ms / 1e6  # noqa: E731
            print(f"add fp32 n=2^{n.bit_length() - 1}: tegula {gbs(t_us, 3):7.0f} GB/s  torch.add "
                  f"{gbs(t_torch, 3):7.0f} GB/s  ratio {t_torch / t_us:5.2f}  copy {gbs(t_copy, 2):7.0f} GB/s"
                  f"  regs={md['n_regs']} {'ok' if ok else 'WRONG'}")
        except Exception:
            log.write(f"=== perf add {n}\n{traceback.format_exc()}\n")
            print(f"add n={n}: ERROR (see log)")
    for rows, cols, warps in ((4096, 1024, 4), (4096, 4096, 8), (4096, 16384, 16)):
        try:
            case = ck.softmax(rows=rows, cols=cols, block=cols, num_warps=warps)
            launch, md, _fn = _load(case, aligned_args=(2, 3))
            x = torch.randn(rows, cols, device="cuda")
            out = torch.empty_like(x)
            t = _bench(lambda: launch((rows, 1, 1), [x, out, cols, cols]))
            t_torch = _bench(lambda: torch.softmax(x, 1))
            ok = torch.allclose(out, torch.softmax(x, 1), atol=1e-6)
            gbs = lambda ms: 2 * rows * cols * 4 / ms / 1e6  # noqa: E731
            print(f"softmax fp32 {rows}x{cols} w{warps}: tegula {gbs(t):7.0f} GB/s  "
                  f"torch {gbs(t_torch):7.0f} GB/s  ratio {t_torch / t:5.2f}  "
                  f"regs={md['n_regs']} spills={md['n_spills']} {'ok' if ok else 'WRONG'}")
        except Exception:
            log.write(f"=== perf softmax {cols}\n{traceback.format_exc()}\n")
            print(f"softmax {cols}: ERROR (see log)")
    try:
        case = ck.vector_add(block=128, n=128)
        launch, md, fn = _load(case)
        x, y = torch.randn(128, device="cuda"), torch.randn(128, device="cuda")
        out = torch.empty_like(x)
        args = [x, y, out, 128]
        cu = driver.cu()
        vals = [ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()]
        arr = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in vals])
        addr = ctypes.addressof(arr)
        stream = torch.cuda.current_stream().cuda_stream

        def raw():
            vals[0].value, vals[1].value, vals[2].value = x.data_ptr(), y.data_ptr(), out.data_ptr()
            vals[3].value = 128
            cu.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, stream, addr, 0)

        def host_us(f, reps=2000):
            f()
            torch.cuda.synchronize()
            best = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(reps):
                    f()
                best.append((time.perf_counter() - t0) / reps * 1e6)
                torch.cuda.synchronize()
            return min(best)
        t_launch = host_us(lambda: launch((1, 1, 1), args))
        t_raw = host_us(raw)
        t_torch = host_us(lambda: torch.add(x, y, out=out))
        print(f"host time per launch (4 args): tegula launcher {t_launch:.2f} us, raw cuLaunchKernel "
              f"{t_raw:.2f} us (ratio {t_launch / t_raw:.2f}), torch.add {t_torch:.2f} us")
    except Exception:
        log.write(f"=== perf launch\n{traceback.format_exc()}\n")
        print("launch overhead: ERROR (see log)")


def main() -> int:
    argv = sys.argv[1:]
    only = ""
    if "--case" in argv:
        i = argv.index("--case")
        only = argv[i + 1]
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    log_path = os.path.abspath(args[0] if args else "gpu_smoke.log")
    if not only:
        print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  log: {log_path}")
        print(f"{'case':34s} {'regs':>5} {'spills':>6} {'smem':>7} {'comp_s':>7} {'host_us':>8}  status")
    with open(log_path, "w") as log:
        failures = correctness(log, only=only, isolate="--isolate" in argv and not only, log_path=log_path)
        if "--no-perf" not in argv and not only:
            perf(log)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
