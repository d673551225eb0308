"""CPU backend benchmark: tegula's compiled CPU backend vs the interpreter vs numpy vs
torch (CPU), in one process, on vector add, softmax, layer norm and matmul, with bounds
checks on and off; plus cold compile time of vector add, warm launch overhead.

    PYTHONPATH=$PWD python benchmarks/cpu_bench.py [--quick] [--threads N] [--rounds R]

How it times (`quiet_timing.py`), the same for every library: each function runs in
blocks of back-to-back calls (~80 ms, 3-10 calls), each block started only once the
process is quiescent (no thread of any library, tegula's included, still spinning
after its last call: torch's OpenMP workers and OpenBLAS's threads otherwise share the
cores with whatever is timed next), its first call not counted (it wakes the
library's sleeping threads); a block's time is the median of its calls. Every
function runs one block per round, in an order rotated from round to round; a figure
is the median over the rounds (default 7, `--quick` 3) with the lowest and highest
block in brackets, and a ratio's spread is the lowest and highest of the per-round
ratios. No library's threading is configured: each runs with its defaults and all
cores (or, with `--threads N`, N threads each: tegula's pool, torch's intra-op
threads, OpenBLAS). The last line says how busy other processes kept the machine
meanwhile: on a shared machine that moves every figure.

Ratios are the baseline's time over tegula-cpu's (> 1: tegula is faster); a goal is
"met" when the lowest per-round ratio reaches it, "median met" when only the median
does.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 0
if THREADS:  # before numpy and torch start their thread pools
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TEGULA_CPU_THREADS"):
        os.environ[var] = str(THREADS)

import numpy as np  # noqa: E402

os.environ["TEGULA_CPU_BACKEND"] = "1"  # the default; set in case the caller's environment turned it off

import tegula  # noqa: E402
import tegula.language as tl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import quiet_timing  # noqa: E402


@tegula.jit
def add_kernel(x, y, o, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@tegula.jit
def softmax_kernel(x, o, N, B: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, B)
    v = tl.load(x + r * N + offs, mask=offs < N, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(o + r * N + offs, e / tl.sum(e, axis=0), mask=offs < N)


@tegula.jit
def layernorm_kernel(x, w, b, o, N, eps, B: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, B)
    m = offs < N
    v = tl.load(x + r * N + offs, mask=m, other=0.0)
    mean = tl.sum(v, axis=0) / N
    d = tl.where(m, v - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    y = d * rstd * tl.load(w + offs, mask=m) + tl.load(b + offs, mask=m)
    tl.store(o + r * N + offs, y, mask=m)


@tegula.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


def bench(fn, reps=5):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def interpreted(fn):
    def run():
        os.environ["TEGULA_INTERPRET"] = "1"
        try:
            fn()
        finally:
            del os.environ["TEGULA_INTERPRET"]
    return run


def checks(on: bool, fn):
    def run():
        os.environ["TEGULA_CPU_BOUNDS_CHECK"] = "1" if on else "0"
        try:
            fn()
        finally:
            os.environ["TEGULA_CPU_BOUNDS_CHECK"] = "1"
    return run


def main() -> None:
    import torch
    torch.set_num_threads(THREADS or os.cpu_count() or 1)
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(0)
    rows = []

    n = 1 << 24
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    o = np.empty_like(x)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    add = lambda: add_kernel[(n // 4096,)](x, y, o, n, B=4096)  # noqa: E731
    rows.append(("vector add fp32 2^24", add, lambda: np.add(x, y, out=o), lambda: torch.add(tx, ty),
                 "numpy", 1))

    R, N = 4096, 1024
    X = rng.standard_normal((R, N), dtype=np.float32)
    O = np.empty_like(X)
    TX = torch.from_numpy(X)
    sm = lambda: softmax_kernel[(R,)](X, O, N, B=1024)  # noqa: E731
    rows.append(("softmax fp32 4096x1024", sm, None, lambda: torch.softmax(TX, 1), "torch", 1))

    W, Bb = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
    TW, TB = torch.from_numpy(W), torch.from_numpy(Bb)
    ln = lambda: layernorm_kernel[(R,)](X, W, Bb, O, N, 1e-5, B=1024)  # noqa: E731
    rows.append(("layer norm fp32 4096x1024", ln, None,
                 lambda: torch.nn.functional.layer_norm(TX, (N,), TW, TB, 1e-5), "torch", 1))

    S = 512 if quick else 1024
    A, Bm = rng.standard_normal((S, S), dtype=np.float32), rng.standard_normal((S, S), dtype=np.float32)
    C = np.empty((S, S), np.float32)
    TA, TBm = torch.from_numpy(A), torch.from_numpy(Bm)
    mm = lambda: matmul_kernel[(S // 64, S // 64)](A, Bm, C, S, S, S, BM=64, BN=64, BK=32)  # noqa: E731
    rows.append((f"matmul fp32 {S}^3", mm, lambda: np.matmul(A, Bm), lambda: TA @ TBm, "numpy", 1))

    n_rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else (3 if quick else 7)
    print(f"tegula CPU backend benchmark, {os.cpu_count()} cores, {THREADS or 'all'} thread(s) each; "
          f"medians over {n_rounds} rounds of blocks timed after quiescence (lowest-highest in brackets; "
          f"interpreter: 1 run)")
    print(f"{'kernel':26s} {'cpu checked':>20s} {'cpu unchecked':>20s} {'numpy':>20s} {'torch':>20s} {'interp':>8s}")
    goals = {"vector add fp32 2^24": ("numpy", 1.0), "softmax fp32 4096x1024": ("torch", 1.0),
             "layer norm fp32 4096x1024": ("torch", 1.0)}
    load = quiet_timing.MachineLoad()
    load.start()

    def cell(ts):
        if not ts:
            return f"{'-':>20s}"
        return f"{quiet_timing.median(ts) * 1e3:7.2f} ({min(ts) * 1e3:.2f}-{max(ts) * 1e3:.2f})".rjust(20)

    for name, fn, np_fn, torch_fn, _base, _ in rows:
        fns = {"on": checks(True, fn), "off": checks(False, fn), "torch": torch_fn}
        if np_fn:
            fns["numpy"] = np_fn
        t = quiet_timing.rounds(fns, n_rounds)
        t_int = bench(interpreted(fn), reps=1) if not name.startswith("matmul") or quick else float("nan")
        goal = goals.get(name, ("numpy", 0.5))
        print(f"{name:26s} {cell(t['on'])} {cell(t['off'])} {cell(t.get('numpy'))} {cell(t['torch'])} "
              f"{t_int * 1e3:6.0f}ms")
        parts = []
        for kind in ("on", "off"):
            r, lo, hi = quiet_timing.ratio(t[goal[0]], t[kind])
            verdict = "met" if lo >= goal[1] else ("median met" if r >= goal[1] else "NOT met")
            parts.append(f"{'checked' if kind == 'on' else 'unchecked'} {r:.2f}x ({lo:.2f}-{hi:.2f}): {verdict}")
        others = [f"interp/cpu {t_int / quiet_timing.median(t['on']):.0f}x"] if t_int == t_int else []
        print(f"{'':26s} goal >= {goal[1]}x {goal[0]}: " + "; ".join(parts + others))
    busy = load.others()
    if busy is not None:
        print(f"during the timed rows, other processes kept {busy[0]:.2f} cores busy on average, "
              f"and the hypervisor took {busy[1]:.2f} cores (steal)")
        if busy[0] + busy[1] > 0.1:
            print("WARNING: the machine was shared during the run; the ratios above are not reliable")

    # cold compile of vector add: a new kernel object, disk cache bypassed
    os.environ["TEGULA_ALWAYS_COMPILE"] = "1"
    src_fn = add_kernel.fn
    fresh = tegula.jit(src_fn)
    small = np.ones(1000, np.float32)
    t0 = time.perf_counter()
    fresh[(1,)](small, small, np.empty_like(small), 1000, B=1024)
    cold = time.perf_counter() - t0
    del os.environ["TEGULA_ALWAYS_COMPILE"]
    t0 = time.perf_counter()
    reps = 2000
    out = np.empty_like(small)
    for _ in range(reps):
        fresh[(1,)](small, small, out, 1000, B=1024)
    warm = (time.perf_counter() - t0) / reps
    print(f"cold compile + first launch of vector add: {cold:.3f} s (goal <= 0.3 s)")
    print(f"warm launch (1 program, 1000 elements), host overhead included: {warm * 1e6:.1f} us")


if __name__ == "__main__":
    main()
