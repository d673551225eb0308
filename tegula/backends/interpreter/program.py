"""A compiled kernel and its launch over a grid: `compile_kernel`, `execute`.

`compile_kernel` turns the kernel body into steps once; `CompiledProgram.run` binds the
arguments (pointer arrays → buffers, scalars coerced with wrapping), then runs the
program instances one after another, pid z, then y, then x (x fastest), each in the
same environment list: SSA values are always written before they are read, so
nothing leaks from one program to the next except the constants and arguments that
every program shares. Everything runs under `np.errstate(all="ignore")`: integer
overflow wraps and float exceptions give inf/NaN silently, as on the GPU.

The runtime may keep a `CompiledProgram` and call `run` per launch; `execute`
compiles each time.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...errors import KernelArgumentError
from ...ir.core import Kernel
from ...ir.types import PointerType, TileType
from . import (  # noqa: F401  (importing the rule modules registers their rules)
    rules_atomic,
    rules_block_pointer,
    rules_control,
    rules_convert,
    rules_debug,
    rules_descriptor,
    rules_dot,
    rules_elementwise,
    rules_extern,
    rules_gather,
    rules_memory,
    rules_reduce,
    rules_shape,
    rules_shared,
)
from .compiler import Compiler, ProgramExit, run_steps
from .memory import Memory
from .registry import MEMORY_SLOT, NPROG_SLOTS, PID_SLOTS, PID_TUPLE_SLOT
from .values import coerce_scalar


class CompiledProgram:
    """A kernel compiled for the interpreter; `run(grid, args)` launches it."""

    def __init__(self, kernel: Kernel, debug: bool = False):
        self.kernel = kernel
        self.debug = debug
        compiler = Compiler(kernel, debug)
        self._arg_slots = compiler.slots(kernel.args)
        with np.errstate(all="ignore"):  # constants are converted (and may overflow) here
            body = compiler.block(kernel.body, top_level=True)
        self._steps = body.steps
        self._n_slots = compiler.n_slots
        self._constants = dict(compiler.constants)
        self._arg_types = [a.type for a in kernel.args]
        names = list(kernel.arg_names) or [a.name for a in kernel.args]
        self._arg_names = names + [f"arg{i}" for i in range(len(names), len(kernel.args))]

    def _bind(self, args: Sequence[Any], memory: Memory) -> list:
        if len(args) != len(self._arg_types):
            raise KernelArgumentError(f"kernel '{self.kernel.name}' takes {len(self._arg_types)} "
                                      f"arguments ({', '.join(self._arg_names)}), got {len(args)}")
        env: list = [None] * self._n_slots
        for slot, value in self._constants.items():
            env[slot] = value
        env[MEMORY_SLOT] = memory
        for slot, t, name, value in zip(self._arg_slots, self._arg_types, self._arg_names, args):
            if isinstance(t, TileType):
                raise KernelArgumentError(f"argument '{name}': tile-typed kernel arguments "
                                          "are not supported")
            if isinstance(t, PointerType):
                if value is None or isinstance(value, (int, float, bool, np.generic)):
                    raise KernelArgumentError(f"argument '{name}' is a pointer ({t}): pass an array, "
                                              f"got {value!r}")
                env[slot] = memory.add(value, name)
            else:
                env[slot] = coerce_scalar(value, t, name)
        return env

    def run(self, grid: Sequence[int], args: Sequence[Any]) -> None:
        gx, gy, gz = _grid3(grid)
        with np.errstate(all="ignore"):
            env = self._bind(args, Memory())
        env[NPROG_SLOTS[0]], env[NPROG_SLOTS[1]], env[NPROG_SLOTS[2]] = (
            np.int32(gx), np.int32(gy), np.int32(gz))
        steps = self._steps
        px, py, pz = PID_SLOTS
        with np.errstate(all="ignore"):
            for z in range(gz):
                env[pz] = np.int32(z)
                for y in range(gy):
                    env[py] = np.int32(y)
                    for x in range(gx):
                        env[px] = np.int32(x)
                        env[PID_TUPLE_SLOT] = (x, y, z)
                        try:
                            run_steps(steps, env)
                        except ProgramExit:
                            pass


def _grid3(grid: Sequence[int]) -> tuple[int, int, int]:
    if isinstance(grid, int):
        grid = (grid,)
    dims = [int(g) for g in grid]
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise KernelArgumentError(f"grid must be 1 to 3 non-negative integers, got {tuple(grid)}")
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def compile_kernel(kernel: Kernel, *, debug: bool = False) -> CompiledProgram:
    """Compile `kernel` for the interpreter (cheap; do it once per kernel)."""
    return CompiledProgram(kernel, debug)


def execute(kernel: Kernel, grid: tuple[int, int, int], args: Sequence[Any], *,
            debug: bool = False) -> None:
    """Run `kernel` over `grid` (x, y, z) with `args` in the order of `kernel.args`:
    arrays for pointer arguments (their bytes are the buffers; stores write into
    them), Python/numpy scalars for the others."""
    compile_kernel(kernel, debug=debug).run(grid, args)
