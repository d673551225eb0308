"""Launch cost of a pointer-table kernel on the CPU backend: a grouped scale that loads
each group's `data_ptr()` from an int64 tensor, as grouped GEMM and MoE kernels do.

    PYTHONPATH=$PWD python benchmarks/pointer_tables_cpu.py [--objects N]

Accesses through loaded pointers are bounds-checked against the host arrays the
addresses fall in, which the launch must find (`backends/host_arrays.py`). The process
holds N extra live Python objects (default 200 000; a real program's count) because
finding arrays by walking the collector's objects costs time proportional to them.
Prints the median launch time with the same tensors every launch, with new tensors
every launch, and how many walks over every object the launches made.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import torch

import tegula
import tegula.language as tl
from tegula.backends.host_arrays import full_walks


@tegula.jit
def grouped_scale(table, sizes, out, BLOCK: tl.constexpr):
    g = tl.program_id(0)
    p = tl.load(table + g).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    n = tl.load(sizes + g)
    tl.store(out + g * BLOCK + offs, tl.load(p + offs, mask=offs < n, other=0) * 2, mask=offs < n)


def launch(xs, out, sizes) -> float:
    table = torch.tensor([x.data_ptr() for x in xs], dtype=torch.int64)
    t0 = time.perf_counter()
    grouped_scale[(len(xs),)](table, sizes, out, 64)
    return time.perf_counter() - t0


def main() -> None:
    n_objects = int(sys.argv[sys.argv.index("--objects") + 1]) if "--objects" in sys.argv else 200_000
    live = [{"k": i} for i in range(n_objects)]  # noqa: F841 - objects a real program holds
    lengths = [64, 17, 40, 5, 64, 33, 12, 50]
    sizes = torch.tensor(lengths, dtype=torch.int32)
    out = torch.zeros(len(lengths), 64)
    xs = [torch.randn(n) for n in lengths]
    launch(xs, out, sizes)  # compile
    for g, x in enumerate(xs):
        torch.testing.assert_close(out[g, :x.numel()], 2 * x)
    walks = full_walks()
    same = [launch(xs, out, sizes) for _ in range(50)]
    walks_same = full_walks() - walks
    fresh = []
    for _ in range(50):
        ys = [torch.randn(n) for n in lengths]
        fresh.append(launch(ys, out, sizes))
        for g, y in enumerate(ys):
            torch.testing.assert_close(out[g, :y.numel()], 2 * y)
    walks_fresh = full_walks() - walks - walks_same
    print(f"pointer-table launch, {len(lengths)} groups, {n_objects} extra live objects "
          f"({len(__import__('gc').get_objects())} tracked):")
    print(f"  same tensors every launch: {np.median(same) * 1e3:.3f} ms median "
          f"({walks_same} walks over every object in 50 launches)")
    print(f"  new tensors every launch:  {np.median(fresh) * 1e3:.3f} ms median "
          f"({walks_fresh} walks over every object in 50 launches)")


if __name__ == "__main__":
    main()
