"""The numpy interpreter behind the backend protocol (see `backend_registry`).

Compiling does nothing beyond the shared stages (the interpreter runs the optimized
tile IR itself); loading prepares the interpreter's program once; each launch converts
the arguments with `HostArgs` (zero-copy for host memory) and runs the grid.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..backends.compiler import GPUTarget
from ..errors import KernelArgumentError
from .args import HostArgs

TARGET = GPUTarget("interpreter", "numpy", 1)


class InterpreterBackend:
    name = "interpreter"
    binary_stage = None
    # Its "binary" is the IR object itself, rebuilt in milliseconds: nothing to store.
    disk_cacheable = False
    # launch options the interpreter's results do not depend on (the autotuner times
    # configs differing only in these once)
    ignored_options = ("num_warps", "num_stages", "num_ctas", "maxnreg", "arch")

    def available(self) -> tuple[bool, str]:
        return True, ""

    def current_target(self, device: int) -> GPUTarget:
        return TARGET

    def compile(self, kernel: Any, options: Any, target: GPUTarget, io: Any) -> tuple[dict, dict]:
        return {}, {"shared": 0}

    def load(self, compiled: Any, device: int):
        from ..backends.interpreter import compile_kernel

        kernel = compiled.ir
        if kernel is None:
            from ..ir.parser import parse_ir

            kernel = parse_ir(compiled.asm["tir_opt"])
        md = compiled.metadata
        program = compile_kernel(kernel, debug=bool(md.debug))
        indices = tuple(md.arg_indices)
        names = list(md.arg_names)
        written = [i for i, n in enumerate(names) if n in set(md.written_args)]
        host = HostArgs(md.name, names, written)
        run = program.run

        def launch(grid: tuple, values: Sequence[Any]) -> None:
            gx, gy, gz = _grid_ints(grid, md.name)
            if gx == 0 or gy == 0 or gz == 0:
                return
            args, writebacks = host.convert([values[i] for i in indices])
            run((gx, gy, gz), args)
            for wb in writebacks:
                wb()

        return launch


def _grid_ints(grid: tuple, name: str) -> tuple[int, int, int]:
    try:
        g = tuple(int(d.__index__()) for d in grid)
    except (AttributeError, TypeError):
        raise KernelArgumentError(f"grid of kernel '{name}' must hold integers, got {grid!r}") from None
    if any(d < 0 for d in g):
        raise KernelArgumentError(f"grid of kernel '{name}' has a negative size: {g}")
    return g  # type: ignore[return-value]
