"""One cell of Triton's tutorial 06 run for a profiler: the cell runs once (autotuning
and compiling), then once more between `cudaProfilerStart` / `cudaProfilerStop`, so that
`ncu --profile-from-start off` sees only the second, tuned run.

    ncu --profile-from-start off --kernel-name regex:_attn_bwd --launch-count 1 ... \\
        python3 benchmarks/profile_tutorial06.py .tutorials/06-fused-attention.py bwd-d64-full-4096
    (the same under `python -m tegula.compat` for tegula)

Cells are named as in `tutorial06_cells.py`.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from tutorial06_cells import load, parse  # noqa: E402


def main() -> None:
    tutorial, cell = sys.argv[1], sys.argv[2]
    module = load(tutorial)
    args = parse(cell)
    real = module.triton

    class OneRun:
        """The tutorial's `triton` with `testing.do_bench` running its function once:
        the autotuner, which looks up `triton.testing` itself, still times for real."""

        def __getattr__(self, name):
            return getattr(real, name)

        class testing:
            @staticmethod
            def do_bench(fn, *a, **k):
                fn()
                torch.cuda.synchronize()
                return 1.0

    module.triton = OneRun()
    module.bench_flash_attention.fn(**args)  # autotuning, compiling, warming up
    torch.cuda.cudart().cudaProfilerStart()
    module.bench_flash_attention.fn(**args)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("profiled", cell, "| _attn_fwd's tuned config:", getattr(module._attn_fwd, "best_config", None))


if __name__ == "__main__":
    main()
