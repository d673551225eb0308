"""The attention forward of the working tree against the same library at a git revision,
in one process (A/B): figures of different processes differ by a few percent on the GPU
machine, more than many kernel changes are worth.

The revision's `tegula/kernels/*.py` are loaded a second time as their own modules
(their jit functions are other kernels, compiled by the working tree's compiler), then
each case runs the three for a warm-up (the GPU at its steady clocks), then times the
revision's forward, the working tree's, and SDPA, each round in another order, and
prints the rounds and their medians.

    python3 benchmarks/attention_ab.py --rev HEAD --cases 128:128x128s2w8ws 64c:128x64s3w8

A case's config may be two, `128:128x128s2w8ws/128x128s2w8wsp`: the revision runs the
first, the working tree the second (a new config against the old best); `tuned` is the
autotuner's choice over the whole list (the chosen configs are printed). `--backward` times
the backward instead (the revision's kernels at the configs the working tree's
autotuner chose). `--rev-env
NAME=VALUE` compiles the revision's kernels with that environment (a compiler knob
off: `--rev HEAD --rev-env TEGULA_LOOP_STORE_BUFFERS=0` is a compiler change's A/B).

`--rev` may also be a folder holding the library's files: the GPU machine's copy of
the repository knows only the commits of the session's start, so a revision made since
travels as files (`mkdir ab_rev && for f in tegula/kernels/*.py; do git show
REV:$f > ab_rev/$(basename $f); done`, an untracked folder the device run carries).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.attention_bench import LIBRARY_FILES, exec_library  # noqa: E402


def load_library_at(rev: str) -> ModuleType:
    """tegula/kernels at `rev` — a git revision, or a folder holding the library's
    files — loaded as a separate `tegula.kernels` package (the working tree's own
    modules are put back afterwards)."""
    exported = Path(rev) if Path(rev).is_dir() else None
    folder = Path(tempfile.mkdtemp(prefix="kernels-"))
    saved = {name: mod for name, mod in sys.modules.items() if name.startswith("tegula.kernels")}
    package = ModuleType("tegula.kernels")
    package.__path__ = [str(folder)]
    sys.modules["tegula.kernels"] = package
    try:
        for name in LIBRARY_FILES:
            if exported is not None:
                text = (exported / f"{name}.py").read_text()
            else:
                text = subprocess.run(["git", "show", f"{rev}:tegula/kernels/{name}.py"], cwd=ROOT, check=True,
                                      capture_output=True, text=True).stdout
            (folder / f"{name}.py").write_text(text)
        exec_library(package, folder)
    finally:
        for name in [n for n in sys.modules if n.startswith("tegula.kernels")]:
            del sys.modules[name]
        sys.modules.update(saved)
    return package


@contextlib.contextmanager
def environment(pairs: list[str]):
    """The process environment with `NAME=VALUE` pairs set, restored afterwards."""
    saved = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        saved[name] = os.environ.get(name)
        os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _order(r: int) -> list[int]:
    """Round r's order of (revision, working tree, SDPA): each first, second and last in
    turn (rotations of the three, then of the reversed three)."""
    base = [0, 1, 2] if (r // 3) % 2 == 0 else [2, 1, 0]
    return base[r % 3:] + base[:r % 3]


def warm_up(runs, seconds: float) -> None:
    """Run `runs` in turn for about `seconds` (synchronized), so that the timing that
    follows meets the GPU at the clocks it holds under load, not a cold one's boost."""
    import torch
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for run in runs:
            run()
        torch.cuda.synchronize()


def backward_runs(old, new, q, k, v, causal, want, rev_env):
    """The three backwards (revision, working tree, SDPA) as runs over kept graphs, their
    dQ errors against SDPA's, and the configs the working tree's autotuner chose for its
    dK/dV and dQ kernels (the revision's kernels are narrowed to the same)."""
    import torch

    from benchmarks.attention_bench import config_label
    d_out = torch.randn_like(want)
    outs = []
    for lib in (new, old):
        for kernel in (lib._dkdv, lib._dq):
            if not hasattr(kernel, "all_configs"):
                kernel.all_configs = list(kernel.configs)
            kernel.configs = list(kernel.all_configs)
    new_out = new.attention(q, k, v, causal=causal)
    new_out.backward(d_out, retain_graph=True)  # tunes the working tree's kernels
    for mine, theirs in ((new._dkdv, old._dkdv), (new._dq, old._dq)):
        picked = (mine.best_config.kwargs, mine.best_config.num_stages, mine.best_config.num_warps)
        theirs.configs = [c for c in theirs.all_configs if (c.kwargs, c.num_stages, c.num_warps) == picked]
    with environment(rev_env):
        old_out = old.attention(q, k, v, causal=causal)
    sdpa_out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    grads = []
    for out in (old_out, new_out, sdpa_out):
        q.grad = None
        out.backward(d_out, retain_graph=True)
        grads.append(q.grad.clone())
        outs.append(out)
    errs = [(g - grads[2]).abs().max().item() for g in grads[:2]]
    chosen = ",".join(config_label(kernel.best_config) for kernel in (new._dkdv, new._dq))
    runs = [lambda out=out: out.backward(d_out, retain_graph=True) for out in outs]
    return runs, errs, chosen


def main() -> int:
    import torch

    import tegula.testing
    from benchmarks.attention_bench import config_label, flops, only_config
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--cases", nargs="+", default=["128:128x128s2w8ws", "128c:128x128s2w8wsol",
                                                   "64:128x64s3w8", "64c:128x64s3w8"])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rev-env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment the revision's kernels are compiled in (a knob's A/B)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backward", action="store_true",
                    help="time the backward (dQ, dK, dV; 2.5x the forward's flops) instead: the working "
                         "tree's library autotunes its kernels, the revision's run the configs it chose")
    ap.add_argument("--warmup-s", type=float, default=2.0,
                    help="seconds of running the three in turn before timing (the GPU at its steady clocks)")
    args = ap.parse_args()
    new = importlib.import_module("tegula.kernels.attention")
    old = load_library_at(args.rev).attention
    bench = tegula.testing.do_bench
    print(f"N{args.n}, Z*H*N = 4*32*4096; TFLOP/s: {args.rev} / working tree / SDPA, {args.rounds} rounds "
          f"in rotating order after {args.warmup_s:.0f} s of warm-up")
    for case in args.cases:
        d, spec = case.split(":")
        causal = d.endswith("c")
        D = int(d.rstrip("c"))
        Z = max(1, 4 * 4096 // args.n)
        q, k, v = (torch.randn(Z, 32, args.n, D, device="cuda", dtype=torch.float16, requires_grad=True)
                   for _ in range(3))
        f = flops(Z, 32, args.n, D, causal)
        old_spec, _, new_spec = spec.partition("/")  # `A/B`: the revision at A, the working tree at B
        only_config(old, old_spec)
        only_config(new, new_spec or old_spec)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        if args.backward:
            runs, errs, chosen = backward_runs(old, new, q, k, v, causal, want, args.rev_env)
            f *= 2.5
        else:
            with environment(args.rev_env):  # (the first call compiles; later ones hit its cache)
                errs = [(old.attention(q, k, v, causal=causal) - want).abs().max().item()]
            errs.append((new.attention(q, k, v, causal=causal) - want).abs().max().item())
            chosen = "/".join(config_label(getattr(m._fwd, "best_config", None)) for m in (old, new))
            runs = [lambda: old.attention(q, k, v, causal=causal), lambda: new.attention(q, k, v, causal=causal),
                    lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)]
        warm_up(runs, args.warmup_s)
        cells = [[], [], []]  # TFLOP/s of the revision, the working tree, SDPA, one per round
        for r in range(args.rounds):
            # each round in another order: the first kernel timed after a pause runs on a
            # cooler, faster-clocked GPU (up to 10% on the H200), which a fixed order
            # would hand to the same contender every time
            for i in _order(r):
                cells[i].append(f / bench(runs[i]) / 1e9)
        med = [statistics.median(c) for c in cells]
        print(f"D{D}{' causal' if causal else '':7s} {spec:16s} ({chosen}) "
              + "  ".join(f"{a:6.1f} / {b:6.1f} / {c:6.1f}" for a, b, c in zip(*cells))
              + f"   medians {med[0]:.1f} / {med[1]:.1f} / {med[2]:.1f}: new/old {med[1] / med[0]:.3f},"
              + f" old/SDPA {med[0] / med[2]:.3f}, new/SDPA {med[1] / med[2]:.3f}"
              + f"  max|out - sdpa| {errs[0]:.1e} {errs[1]:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
