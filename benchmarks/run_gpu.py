"""Side-by-side GPU benchmarks: tegula vs Triton 3.6 vs torch, in one process.

Usage (on the GPU machine):
    python benchmarks/run_gpu.py [--out DIR] [--only NAME ...] [--rounds N]

The same kernel source (`kernels.py`) and meta-parameters go to both compilers. Every
row is checked against torch before it is timed; times are medians of
`triton.testing.do_bench` (the reference's own timer, so both sides are measured the
same way). Each row is timed in `--rounds` interleaved rounds (tegula, Triton, torch,
then the reverse order, ...) and each side's time is the median over the rounds, so a
drift of the GPU's clock or memory state during the run does not land on one side
only; the rows keep every round's ratio, and a second ratio from launches timed
alternately one by one (`paired_ratio`). tegula and Triton write the same output
buffer. Prints a table of ratios last and writes JSON to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.load import load_tegula_kernels, load_triton_kernels  # noqa: E402

ROWS: list[dict] = []
ENV: dict = {}
ROUNDS = 5


def bench(fn) -> float:
    try:
        from triton.testing import do_bench
    except ImportError:
        from tegula.testing import do_bench
    return do_bench(fn, return_mode="median")


def set_rounds(n: int) -> None:
    global ROUNDS
    ROUNDS = max(1, n)


def bench_rounds(fns: dict) -> tuple[dict, list[dict]]:
    """Time every callable of `fns` in ROUNDS interleaved rounds (the order reversed
    every other round); returns each one's median time and the rounds' times."""
    rounds = []
    names = list(fns)
    for r in range(ROUNDS):
        order = names if r % 2 == 0 else names[::-1]
        rounds.append({who: bench(fns[who]) for who in order})
    return {who: statistics.median(t[who] for t in rounds) for who in names}, rounds


def paired_ratio(fns: dict, reps: int = 400) -> float | None:
    """tegula's throughput over Triton's from launches timed alternately, one by one,
    each after the same L2 flush as `do_bench`'s (median of each side's times): the two
    sides then see the same clocks and memory state, which separate `do_bench` calls
    cannot promise (their ratio moves by a few percent on kernels of ~10 µs)."""
    if "tegula" not in fns or "triton" not in fns:
        return None
    flush = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
    times: dict[str, list[float]] = {"tegula": [], "triton": []}
    for who in times:  # warm up both
        fns[who]()
    torch.cuda.synchronize()
    events = []
    for i in range(reps):
        for who in (("tegula", "triton") if i % 2 == 0 else ("triton", "tegula")):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fns[who]()
            end.record()
            events.append((who, start, end))
    torch.cuda.synchronize()
    for who, start, end in events:
        times[who].append(start.elapsed_time(end))
    return statistics.median(times["triton"]) / statistics.median(times["tegula"])


def record(name, size, unit, metric, rounds=(), paired=None, **times_ms):
    row = {"bench": name, "size": size, "unit": unit}
    for who, ms in times_ms.items():
        row[who + "_ms"] = ms
        row[who] = metric(ms) if ms else None
    if row.get("tegula") and row.get("triton"):
        row["tegula/triton"] = row["tegula"] / row["triton"]
        # time ratio per round (Triton's time / tegula's: > 1 means tegula is faster)
        row["rounds_tegula/triton"] = [t["triton"] / t["tegula"] for t in rounds if "tegula" in t and "triton" in t]
    if paired is not None:
        row["paired_tegula/triton"] = paired
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def copy_bandwidth() -> None:
    n = 2**27
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    ms = bench(lambda: y.copy_(x))
    ENV["d2d_copy_GBps"] = 8 * n / ms / 1e6
    print("device-to-device copy GB/s", round(ENV["d2d_copy_GBps"]), flush=True)


def bench_add(tg, tr) -> None:
    for n in (2**20, 2**24, 2**27):
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        fns = {}
        ref = x + y
        o = torch.empty_like(x)  # one output buffer for both compilers (see `checked`)
        for who, mod in (("tegula", tg), ("triton", tr)):
            if mod is None:
                continue
            fns[who] = (lambda mod=mod: mod.add_kernel[(triton_cdiv(n, 1024),)](x, y, o, n, BLOCK=1024))
            checked(fns[who], o, ref)
        o_t = torch.empty_like(x)
        fns["torch"] = lambda: torch.add(x, y, out=o_t)
        times, rounds = bench_rounds(fns)
        paired = paired_ratio(fns)
        record("vector_add_fp32", n, "GB/s", lambda ms: 12 * n / ms / 1e6, rounds, paired, **times)
        if n == 2**27 and "tegula" in times:
            ENV["add_2^27_fraction_of_copy"] = (12 * n / times["tegula"] / 1e6) / ENV["d2d_copy_GBps"]


def checked(fn, out, ref, **tol) -> None:
    """Run `fn` once into `out` (first filled with NaN, so a kernel that writes nothing
    cannot pass on another's results) and compare with `ref`. tegula and Triton write the
    same output buffer: both are then timed on the same memory, whose placement is not
    something either compiler chooses."""
    out.fill_(float("nan"))
    fn()
    torch.testing.assert_close(out, ref, **tol)


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def bench_softmax(tg, tr) -> None:
    M = 4096
    for N in (1000, 4096, 16384):
        x = torch.randn(M, N, device="cuda")
        B = next_pow2(N)
        w = 4 if B < 2048 else (8 if B < 8192 else 16)
        ref = torch.softmax(x, -1)
        fns = {}
        o = torch.empty_like(x)
        for who, mod in (("tegula", tg), ("triton", tr)):
            if mod is None:
                continue
            fns[who] = (lambda mod=mod: mod.softmax_kernel[(M,)](o, x, x.stride(0), o.stride(0), N,
                                                                 BLOCK=B, num_warps=w))
            checked(fns[who], o, ref)
        fns["torch"] = lambda: torch.softmax(x, -1)
        times, rounds = bench_rounds(fns)
        paired = paired_ratio(fns)
        record("softmax_fp32", f"{M}x{N}", "GB/s", lambda ms: 8 * M * N / ms / 1e6, rounds, paired, **times)


def bench_layernorm(tg, tr) -> None:
    M = 4096
    for N in (1024, 4096, 8192):
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        w = torch.rand(N, device="cuda", dtype=torch.float16)
        b = torch.rand(N, device="cuda", dtype=torch.float16)
        B = next_pow2(N)
        nw = min(max(B // 256, 1), 16)
        ref = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
        fns = {}
        y = torch.empty_like(x)
        for who, mod in (("tegula", tg), ("triton", tr)):
            if mod is None:
                continue
            fns[who] = (lambda mod=mod: mod.layernorm_kernel[(M,)](x, y, w, b, x.stride(0), N, 1e-5,
                                                                   BLOCK=B, num_warps=nw))
            checked(fns[who], y, ref, atol=1e-2, rtol=1e-2)
        fns["torch"] = lambda: torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
        times, rounds = bench_rounds(fns)
        paired = paired_ratio(fns)
        record("layernorm_fwd_fp16", f"{M}x{N}", "GB/s", lambda ms: 4 * M * N / ms / 1e6, rounds, paired, **times)


MATMUL_CASES = [  # (size, dtype, (BM, BN, BK, stages, warps)): the tensor-core issue's rows first
    (4096, "float16", (128, 256, 64, 3, 8)), (8192, "float16", (128, 256, 64, 3, 8)),
    (3000, "float16", (128, 128, 64, 4, 4)), (4096, "bfloat16", (128, 256, 64, 3, 8)),
    (4096, "float16", (128, 128, 64, 4, 8)), (4096, "float16", (128, 128, 32, 4, 4)),
    (4096, "float16", (64, 128, 32, 4, 4)),
    (8192, "float8_e4m3fn", (128, 256, 128, 3, 8)),  # B K-major, as fp8 tensor cores need
]


def parse_matmul_case(text: str) -> tuple:
    """'3000:float16:128,128,64,4,4' → a MATMUL_CASES row; a fifth field `rowb` gives an
    8-bit row a row-major B (the layout 8-bit tensor cores do not read directly)."""
    size, dtype, cfg, *layout = text.split(":")
    bm, bn, bk, stages, warps = (int(x) for x in cfg.split(","))
    return (int(size), dtype, (bm, bn, bk, stages, warps), *layout)


def bench_matmul(tg, tr) -> None:
    """C = A @ B (fp32 accumulation, output in the input type) with Triton's tutorial
    kernel and a fixed config per row; cuBLAS through torch.matmul."""
    for size, dt, (bm, bn, bk, stages, warps), *layout in MATMUL_CASES:
        dtype = getattr(torch, dt)
        fp8 = dtype.itemsize == 1
        row_b = layout == ["rowb"]
        if fp8:  # A row-major, B column-major (a transposed row-major matrix) unless `rowb`; C fp16
            a = torch.randn(size, size, device="cuda").to(dtype)
            b = torch.randn(size, size, device="cuda").to(dtype).T
            b_cublas = b  # torch._scaled_mm wants B column-major
            if row_b:
                b = b.contiguous()
            c = torch.empty(size, size, device="cuda", dtype=torch.float16)
            ref = (a.float() @ b.float()).half()
        else:
            a = torch.randn(size, size, device="cuda", dtype=dtype)
            b = torch.randn(size, size, device="cuda", dtype=dtype)
            c = torch.empty(size, size, device="cuda", dtype=dtype)
            ref = torch.matmul(a, b)
        grid = (triton_cdiv(size, bm) * triton_cdiv(size, bn),)
        fns = {}
        for who, mod in (("tegula", tg), ("triton", tr)):
            if mod is None:
                continue
            fns[who] = (lambda mod=mod: mod.matmul_kernel[grid](
                a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                num_warps=warps, num_stages=stages))
            # fp8 tensor cores on Hopper accumulate with ~14 mantissa bits (Triton's default too)
            checked(fns[who], c, ref, atol=4.0 if fp8 else 0.125, rtol=0.02)
        c_t = torch.empty_like(c)
        if fp8:
            one = torch.tensor(1.0, device="cuda")
            fns["cublas"] = lambda: torch._scaled_mm(a, b_cublas, scale_a=one, scale_b=one, out_dtype=torch.float16)
        else:
            fns["cublas"] = lambda: torch.matmul(a, b, out=c_t)
        times, rounds = bench_rounds(fns)
        flops = 2 * size**3
        record(f"matmul_{dt}" + ("_rowB" if row_b else ""), f"{size}^3 {bm}x{bn}x{bk} s{stages} w{warps}", "TFLOP/s",
               lambda ms: flops / ms / 1e9, rounds, None, tegula=times.get("tegula"), triton=times.get("triton"),
               torch=times["cublas"])


ATTENTION_CASES = [  # (Z, H, N_CTX, HEAD_DIM, causal, (BLOCK_M, BLOCK_N, stages, warps))
    (4, 32, 4096, 64, False, (128, 64, 3, 8)), (4, 32, 4096, 64, True, (128, 64, 3, 8)),
    (4, 32, 4096, 128, False, (128, 64, 3, 8)), (4, 32, 4096, 128, True, (128, 64, 3, 8)),
]


def bench_attention(tg, tr) -> None:
    """The attention example's kernel (benchmarks/kernels.py), one fixed config per row
    for both compilers; torch's scaled_dot_product_attention beside them."""
    for z, h, n, d, causal, (bm, bn, stages, warps) in ATTENTION_CASES:
        q, k, v = (torch.randn(z, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        out = torch.empty_like(q)
        scale = 1.0 / math.sqrt(d)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        grid = (triton_cdiv(n, bm), z * h)
        fns = {}
        for who, mod in (("tegula", tg), ("triton", tr)):
            if mod is None:
                continue
            fns[who] = (lambda mod=mod: mod.attention_fwd_kernel[grid](
                q, k, v, out, scale, q.stride(0), q.stride(1), q.stride(2), q.stride(3), h, n,
                HEAD_DIM=d, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages))
            checked(fns[who], out, ref, atol=2e-2, rtol=2e-2)
        fns["torch"] = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        times, rounds = bench_rounds(fns)
        flops = 4 * z * h * n * n * d * (0.5 if causal else 1.0)
        record("attention_fwd_fp16", f"Z{z}H{h}N{n}D{d}{' causal' if causal else ''}", "TFLOP/s",
               lambda ms: flops / ms / 1e9, rounds, None, **times)


def host_time_per_launch(fn, bursts: int = 50, burst: int = 200) -> float:
    """Median host time (µs) per call over bursts of back-to-back launches."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(bursts):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(burst):
            fn()
        samples.append((time.perf_counter() - t0) / burst * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def raw_launch_floor(tg_kernel, args) -> float:
    """cuLaunchKernel through cuda-bindings with a pre-packed void** array (the floor
    ANCHORS.md quotes), on the PTX tegula produced for the same kernel."""
    import ctypes

    from cuda.bindings import driver as cu

    compiled = tg_kernel.warmup(*args, grid=(1,), BLOCK=16)
    ptx = compiled.asm["ptx"]
    ptx = ptx.encode() if isinstance(ptx, str) else ptx
    err, mod = cu.cuModuleLoadData(ptx + b"\0")
    assert err == cu.CUresult.CUDA_SUCCESS, err
    err, fn = cu.cuModuleGetFunction(mod, compiled.metadata.name.encode())
    assert err == cu.CUresult.CUDA_SUCCESS, err
    x, y, o, n = args
    slots = [ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()]
    arr = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
    addr = ctypes.addressof(arr)
    stream = torch.cuda.current_stream().cuda_stream
    threads = 32 * compiled.metadata.num_warps

    def launch():
        slots[0].value = x.data_ptr()
        slots[1].value = y.data_ptr()
        slots[2].value = o.data_ptr()
        slots[3].value = n
        cu.cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, stream, addr, 0)

    return host_time_per_launch(launch)


def interleaved_host_times(fns: dict, rounds: int = 50, burst: int = 200) -> tuple[dict, float]:
    """Host time per call (µs, median over rounds) of each function, the functions
    taking turns burst by burst so that both see the same machine state; and the median
    over rounds of the first function's time over the second's."""
    for fn in fns.values():
        fn()
    samples: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(burst):
                fn()
            samples[name].append((time.perf_counter() - t0) / burst * 1e6)
    torch.cuda.synchronize()
    names = list(fns)
    ratio = statistics.median(a / b for a, b in zip(samples[names[0]], samples[names[-1]]))
    return {name: statistics.median(v) for name, v in samples.items()}, ratio


def bench_overhead(tg, tr) -> None:
    x, y = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    o = torch.empty_like(x)
    res = {}
    scal = [1.5] * 11
    for n_args, launch in ((5, lambda mod: mod.add_kernel[(1,)](x, y, o, 16, BLOCK=16)),
                           (15, lambda mod: mod.add15_kernel[(1,)](x, y, o, 16, *scal, BLOCK=16))):
        fns = {who: (lambda mod=mod: launch(mod)) for who, mod in (("tegula", tg), ("triton", tr)) if mod is not None}
        times, ratio = interleaved_host_times(fns)
        for who, us in times.items():
            res[f"{who}_{n_args}arg_us"] = us
        if len(fns) == 2:
            res[f"interleaved_{n_args}arg_tegula/triton"] = ratio
    res["torch_add_us"] = host_time_per_launch(lambda: torch.add(x, y, out=o))
    try:
        res["raw_cuLaunchKernel_us"] = raw_launch_floor(tg.add_kernel, (x, y, o, 16))
    except Exception as ex:  # the floor is a reference figure; report why it is missing
        res["raw_cuLaunchKernel_error"] = repr(ex)[:200]
    ENV.update(res)
    print(json.dumps(res), flush=True)


COMPILE_SNIPPET = textwrap.dedent('''
    import os, sys, time, json
    sys.path.insert(0, {root!r})
    import torch
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()   # context set-up outside the timing
    t0 = time.perf_counter()
    {imp}
    t_import = time.perf_counter() - t0
    x = torch.randn(4096, device="cuda"); o = torch.empty_like(x)
    t0 = time.perf_counter()
    mod.add_kernel[(4,)](x, x, o, 4096, BLOCK=1024); torch.cuda.synchronize()
    t_add = time.perf_counter() - t0
    # the tensor-core issue's row: the 128x256x64 fp16 matmul, compiled on first launch
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16); c = torch.empty_like(a)
    t0 = time.perf_counter()
    mod.matmul_kernel[(32,)](a, a, c, 1024, 1024, 1024, 1024, 1, 1024, 1, 1024, 1, BLOCK_M=128, BLOCK_N=256,
                             BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
    torch.cuda.synchronize()
    print(json.dumps({{"import_s": t_import, "first_launch_s": t_add,
                      "matmul_first_launch_s": time.perf_counter() - t0}}))
''')


def bench_compile(tg, tr) -> None:
    root = str(Path(__file__).resolve().parent.parent)
    imports = {
        "tegula": "from benchmarks.load import load_tegula_kernels; mod = load_tegula_kernels()",
        "triton": "from benchmarks.load import load_triton_kernels; mod = load_triton_kernels()",
    }
    # tegula's modules byte-compiled first, as pip leaves an installed package (Triton's
    # are): a checkout run with PYTHONDONTWRITEBYTECODE=1 (as on the device machine
    # may be) otherwise compiles ~200 modules from source in every fresh process,
    # 0.4 s on a 2-core CPU, which a user never pays
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(root) / "tegula")], check=False,
                   capture_output=True)
    for who, imp in imports.items():
        if (who == "triton" and tr is None) or (who == "tegula" and tg is None):
            continue
        cache = tempfile.mkdtemp(prefix=f"{who}-cache-")
        env = dict(os.environ, TEGULA_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
        for phase in ("cold", "warm"):
            out = subprocess.run([sys.executable, "-c", COMPILE_SNIPPET.format(root=root, imp=imp)],
                                 capture_output=True, text=True, env=env, timeout=300)
            if out.returncode != 0:
                ENV[f"{who}_{phase}_compile_error"] = out.stderr[-500:]
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            ENV[f"{who}_{phase}_first_launch_s"] = r["first_launch_s"]
            ENV[f"{who}_{phase}_matmul_first_launch_s"] = r["matmul_first_launch_s"]
            ENV[f"{who}_{phase}_import_s"] = r["import_s"]
    print(json.dumps({k: v for k, v in ENV.items() if "compile" in k or "first_launch" in k}), flush=True)


def environment() -> None:
    import numpy

    ENV["gpu"] = torch.cuda.get_device_name()
    ENV["torch"] = torch.__version__
    ENV["numpy"] = numpy.__version__
    ENV["python"] = sys.version.split()[0]
    ENV["date"] = time.strftime("%Y-%m-%d")
    for name in ("triton", "llvmlite", "cuda.bindings"):
        try:
            m = __import__(name, fromlist=["x"])
            ENV[name] = getattr(m, "__version__", "?")
        except ImportError:
            ENV[name] = "missing"


def print_table() -> None:
    print(f"\n{'bench':22} {'size':12} {'tegula':>9} {'triton':>9} {'torch':>9} {'unit':8} {'teg/tri':>8}")
    for r in ROWS:
        def f(k):
            return f"{r[k]:9.1f}" if r.get(k) else f"{'-':>9}"
        ratio = f"{r['tegula/triton']:8.3f}" if r.get("tegula/triton") else f"{'-':>8}"
        spread = ""
        if len(r.get("rounds_tegula/triton", ())) > 1:
            spread = f"  rounds {min(r['rounds_tegula/triton']):.3f}..{max(r['rounds_tegula/triton']):.3f}"
        if r.get("paired_tegula/triton"):
            spread += f"  paired {r['paired_tegula/triton']:.3f}"
        print(f"{r['bench']:22} {str(r['size']):12} {f('tegula')} {f('triton')} {f('torch')} {r['unit']:8} {ratio}"
              f"{spread}")
    keys = [k for k in ENV if k.endswith("_us") or k.endswith("_s") or "fraction" in k or "copy" in k]
    for k in keys:
        v = ENV[k]
        print(f"  {k:34} {v:.3f}" if isinstance(v, float) else f"  {k:34} {v}")
    if ENV.get("tegula_5arg_us") and ENV.get("triton_5arg_us"):
        for n in (5, 15):
            print(f"  launch {n}-arg tegula/triton         {ENV[f'tegula_{n}arg_us'] / ENV[f'triton_{n}arg_us']:.3f}"
                  f"  (median of interleaved rounds {ENV[f'interleaved_{n}arg_tegula/triton']:.3f})")
    if ENV.get("tegula_5arg_us") and ENV.get("raw_cuLaunchKernel_us"):
        print(f"  launch 5-arg tegula/raw floor       {ENV['tegula_5arg_us'] / ENV['raw_cuLaunchKernel_us']:.3f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", tempfile.gettempdir()))
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved timing rounds per row")
    p.add_argument("--matmul", nargs="*", default=None, metavar="SIZE:DTYPE:BM,BN,BK,STAGES,WARPS",
                   help="matmul rows to run instead of the standard ones, e.g. 3000:float16:128,128,64,4,4")
    a = p.parse_args()
    set_rounds(a.rounds)
    if a.matmul:
        MATMUL_CASES[:] = [parse_matmul_case(c) for c in a.matmul]
    environment()
    tg = load_tegula_kernels()
    tr = load_triton_kernels()
    steps = {"copy": lambda: copy_bandwidth(), "add": lambda: bench_add(tg, tr),
             "softmax": lambda: bench_softmax(tg, tr), "layernorm": lambda: bench_layernorm(tg, tr),
             "matmul": lambda: bench_matmul(tg, tr), "attention": lambda: bench_attention(tg, tr),
             "overhead": lambda: bench_overhead(tg, tr), "compile": lambda: bench_compile(tg, tr)}
    for name, step in steps.items():
        if a.only and name not in a.only and name != "copy":
            continue
        t0 = time.time()
        try:
            step()
        except Exception as ex:
            import traceback

            traceback.print_exc()
            ENV[f"error_{name}"] = repr(ex)[:300]
        print(f"## {name} took {time.time() - t0:.1f}s", flush=True)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    Path(a.out, "bench.json").write_text(json.dumps({"env": ENV, "rows": ROWS}, indent=1))
    print_table()


if __name__ == "__main__":
    main()
