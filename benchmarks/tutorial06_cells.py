"""Selected cells of Triton's tutorial 06 (fused attention), unmodified, timed through
the tutorial's own `bench_flash_attention` — without sweeping all of its tables, which
takes longer than one device call under either compiler.

    python benchmarks/tutorial06_cells.py TUTORIAL.py [--cells bwd-d64-causal-4096 ...]
    python -m tegula.compat benchmarks/tutorial06_cells.py TUTORIAL.py ...

A cell is MODE-dHEAD_DIM-(causal|full)-N_CTX[-fp8][-ws]. The tutorial is loaded as a
module (its `__main__` block does not run), so under `python -m tegula.compat` every
`import triton` in it resolves to tegula. Prints one line per cell: the compiler, the
cell and TFLOP/s, then the wall time the cell took (autotuning included).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
from benchmarks.load import import_file  # noqa: E402

DEFAULT_CELLS = [
    "bwd-d64-causal-4096", "bwd-d64-full-4096", "bwd-d64-full-16384", "bwd-d128-full-4096",
    "fwd-d64-full-4096-fp8", "fwd-d128-full-16384-fp8",
    "fwd-d64-full-4096", "fwd-d128-full-16384", "fwd-d128-causal-16384",
]


def load(path: str):
    return import_file("tutorial06", path)


def parse(cell: str) -> dict:
    parts = cell.split("-")
    mode, head, mask, n = parts[:4]
    flags = set(parts[4:])
    return dict(BATCH=4, H=32, N_CTX=int(n), HEAD_DIM=int(head.lstrip("d")), causal=mask == "causal",
                warp_specialize="ws" in flags, mode=mode,
                provider="triton-fp8" if "fp8" in flags else "triton-fp16")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--cells", nargs="+", default=DEFAULT_CELLS)
    args = ap.parse_args()
    import triton
    who = "tegula" if getattr(triton, "__file__", "").find("tegula") >= 0 else "triton"
    module = load(args.tutorial)
    for cell in args.cells:
        start = time.perf_counter()
        try:
            tflops = module.bench_flash_attention.fn(**parse(cell))
            result = f"{tflops:8.1f}"
        except Exception as e:  # keep going: one failing cell must not hide the others
            result = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
        print(f"{who:7s} {cell:28s} {result}   ({time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
