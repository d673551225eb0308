"""tegula: a tile-based GPU kernel language and compiler, drop-in compatible with Triton 3.6.

    import tegula as triton
    import tegula.language as tl

This module is the public surface and mirrors Triton's top level: `jit`, `autotune`,
`heuristics`, `Config`, `compile`, `cdiv`, `next_power_of_2`, the errors, and the
`language`, `testing` and `runtime` modules. `python -m tegula.compat script.py` runs a
script written for `import triton` unchanged.
"""
from __future__ import annotations

__version__ = "0.1.0"
# the Triton release whose API tegula follows: what `triton.__version__` reads under
# `tegula.compat`
__triton_version__ = "3.6.0"

import sys as _sys

from . import knobs, language, runtime, testing
from .errors import CompilationError, KernelArgumentError, OutOfResources, TegulaError
from .language.constexpr_function import constexpr_function
from .runtime._allocation import set_allocator
from .runtime.args import MockTensor, TensorWrapper, reinterpret
from .runtime.autotuner import Config, autotune
from .runtime.compiler import compile
from .runtime.heuristics import heuristics
from .runtime.jit import JITFunction, jit
from .runtime.kernel_interface import KernelInterface

# Triton's name for the base class of its errors.
TritonError = TegulaError


def cdiv(x: int, y: int) -> int:
    """Ceiling division: the number of blocks of size `y` that cover `x`."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= n (n <= 0 gives 0, as in Triton)."""
    n = int(n)
    return 1 << (n - 1).bit_length() if n > 0 else 0


# With torch already loaded, launches inside torch.compile become custom ops from the
# start (tegula/torch); a torch imported later is noticed at the first launch.
if _sys.modules.get("torch") is not None:
    from . import torch as _torch_integration  # noqa: F401

__all__ = [
    "CompilationError", "Config", "JITFunction", "KernelArgumentError", "KernelInterface", "MockTensor",
    "OutOfResources", "TegulaError", "TensorWrapper", "TritonError", "__triton_version__", "__version__",
    "autotune", "cdiv", "constexpr_function",
    "compile", "heuristics", "jit", "knobs", "language", "next_power_of_2", "reinterpret", "runtime",
    "set_allocator", "testing",
]
