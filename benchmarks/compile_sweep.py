"""Compile faults the autotuner would hide: fla's ops run on the CPU through tegula (small
shapes, bf16), every kernel specialization they compile is recorded, and each is then
compiled for the GPU targets over num_warps × num_stages. No GPU needed (ptxas, when on
the PATH, assembles each one too).

    python benchmarks/compile_sweep.py [--ops gla,gdn,delta,kda,simple_gla] [--warps 1,2,4,8]
                                       [--stages 2,3] [--capabilities 90,80]
                                       [--save-ptx before.json | --compare-ptx before.json]

An autotuner skips a config that fails to compile (tegula's warns when the compiler
itself failed, `errors.InternalCompilerError`), so a compiler fault on a config the
benchmarks never pick shows nowhere else: fla's prepare_wy_repr_bwd did not compile with
4 or 8 warps for a session, and its tuning silently had only 2. Prints one line per
failure and a count; exits 1 when any compile failed. fla comes from `.libs/`
(`prepare_libs.sh`) or an installed copy. `--save-ptx` records a digest of every
compile's PTX, `--compare-ptx` lists the compiles whose PTX differs from such a record
(a change to the compiler's middle checked against fla's kernels, as `ptx_corpus.py`
checks it against the benchmarks').
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import itertools
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT / ".libs" / "fla", ROOT / ".libs" / "site"):
    if p.is_dir() and str(p) not in sys.path:
        sys.path.insert(0, str(p))
sys.path.insert(0, str(ROOT))

B, T, H, D = 1, 128, 2, 64  # small: the CPU runs each op once, the shapes only select kernels


def _inputs(torch: Any, gate_per_channel: bool) -> tuple:
    import torch.nn.functional as F

    def leaf(x: Any) -> Any:
        return x.bfloat16().requires_grad_(True)

    q, k = (F.normalize(torch.randn(B, T, H, D), dim=-1) for _ in range(2))
    v = torch.randn(B, T, H, D)
    beta = torch.rand(B, T, H).sigmoid()
    shape = (B, T, H, D) if gate_per_channel else (B, T, H)
    gate = F.logsigmoid(torch.randn(*shape)) / 16
    return leaf(q), leaf(k), leaf(v), beta.requires_grad_(True), gate.requires_grad_(True)


# op: (module, function, gate per channel?, the call given the function and q, k, v, beta, gate)
OPS: dict[str, tuple[str, str, bool, Callable[..., Any]]] = {
    "gla": ("fla.ops.gla", "chunk_gla", True, lambda f, q, k, v, b, g: f(q, k, v, g)),
    "gdn": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule", False,
            lambda f, q, k, v, b, g: f(q, k, v, g, b, output_final_state=True)),
    "delta": ("fla.ops.delta_rule", "chunk_delta_rule", False, lambda f, q, k, v, b, g: f(q, k, v, b)),
    "kda": ("fla.ops.kda", "chunk_kda", True, lambda f, q, k, v, b, g: f(q, k, v, g, b, output_final_state=True)),
    "simple_gla": ("fla.ops.simple_gla", "chunk_simple_gla", False, lambda f, q, k, v, b, g: f(q, k, v, g)),
}


def _run_op(torch: Any, name: str) -> Any:
    """The op's output on fresh inputs (its backward's kernels are specializations too)."""
    module, function, per_channel, call = OPS[name]
    return call(getattr(importlib.import_module(module), function), *_inputs(torch, per_channel))[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default="gla,gdn,delta,kda,simple_gla")
    ap.add_argument("--warps", default="1,2,4,8")
    ap.add_argument("--stages", default="2,3")
    ap.add_argument("--capabilities", default="90,80")
    ap.add_argument("--save-ptx", help="write a digest of each compile's PTX to this JSON file")
    ap.add_argument("--compare-ptx", help="list the compiles whose PTX differs from this --save-ptx file")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")  # the libraries' autotune-key notes
    # every specialization compiled, none loaded from the disk cache past the recording,
    # and every autotuner config tried (no tuning results remembered from a last run)
    os.environ["TEGULA_ALWAYS_COMPILE"] = "1"
    os.environ["TEGULA_CACHE_DIR"] = os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile-sweep-")
    import tegula.compat
    tegula.compat.install()
    import torch

    import tegula.runtime.compiler as runtime_compiler
    from tegula.backends.compiler import GPUTarget

    compile_ = runtime_compiler.compile
    sources: dict[tuple, Any] = {}

    def record(src: Any, *args: Any, **kwargs: Any) -> Any:
        key = (src.fn.__name__, repr(sorted(src.signature.items())),
               repr(sorted((k, repr(v)) for k, v in src.constexprs.items())))
        sources.setdefault(key, src)
        return compile_(src, *args, **kwargs)

    runtime_compiler.compile = record  # the JIT's compile calls go through the module
    torch.manual_seed(0)
    try:
        for name in a.ops.split(","):
            t0 = time.perf_counter()
            _run_op(torch, name).float().sum().backward()
            print(f"ran {name} on the CPU ({time.perf_counter() - t0:.0f} s): {len(sources)} specializations so far",
                  flush=True)
    finally:
        runtime_compiler.compile = compile_
    grid = list(itertools.product([int(c) for c in a.capabilities.split(",")], [int(w) for w in a.warps.split(",")],
                                  [int(s) for s in a.stages.split(",")]))
    failed = 0
    digests: dict[str, str] = {}
    t0 = time.perf_counter()
    for (name, sig, cx), src in sorted(sources.items(), key=lambda kv: kv[0][0]):
        for capability, warps, stages in grid:
            try:
                kernel = compile_(src, target=GPUTarget("cuda", capability, 32),
                                  options={"num_warps": warps, "num_stages": stages})
                key = f"{name} {sig} {cx} sm_{capability} w{warps} s{stages}"
                digests[key] = hashlib.sha256(kernel.asm["ptx"].encode()).hexdigest()[:16]
            except Exception as e:  # every failure is reported; the count decides the exit code
                failed += 1
                print(f"FAIL {name} sm_{capability} num_warps={warps} num_stages={stages}: "
                      f"{type(e).__name__}: {str(e)[:300]}", flush=True)
    print(f"compile_sweep: {len(sources)} specializations × {len(grid)} targets/configs: "
          f"{len(sources) * len(grid) - failed} compiled, {failed} failed ({time.perf_counter() - t0:.0f} s)")
    if a.save_ptx:
        Path(a.save_ptx).write_text(json.dumps(digests, indent=0, sort_keys=True))
    if a.compare_ptx:
        before = json.loads(Path(a.compare_ptx).read_text())
        changed = sorted(k for k in digests if k in before and before[k] != digests[k])
        for k in changed:
            print(f"PTX differs: {k[:300]}")
        print(f"compare: {len(digests) - len(changed)} the same PTX, {len(changed)} different, "
              f"{len(set(digests) ^ set(before))} compiled on one side only")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
