"""The backends the numerical suite runs every test on, and `run`, the one launch
helper the tests call: `run(kernel, grid, *args, debug=False)` executes a hand-built
kernel on numpy arrays (any views; CPU torch tensors too) and Python scalars on the
current backend, leaving what the kernel wrote in the arrays, as the interpreter does.

- "interpreter": `tegula.backends.interpreter.execute`, the reference;
- "cuda": a real GPU through the CUDA backend's own compile / load / launcher path
  with torch CUDA tensors (`tests/backends/cuda/gpu_runner.run_on_gpu`); skipped only
  where there is no CUDA GPU;
- "cuda-emulated": the same lowering run on the host emulator
  (`backends/cuda/emulator/`), so CI exercises it without a GPU, once per capability of
  `EMULATED_CAPABILITIES` (test ids `cuda-emulated-sm90`, `cuda-emulated-sm80`;
  `capability()` says which). Each kernel it runs is also compiled to PTX and
  assembled by ptxas for sm_80 and sm_90a when ptxas is present (CI's "every test
  kernel assembles" check), once per kernel, so the second capability's run costs
  about a third of the first (measured on the 2-core CI machine: 90 s of one core for
  the suite at sm_90, 29 s more for sm_80).
- "cpu": the compiled CPU backend (`backends/cpu`), bounds checks on; a kernel using an
  op it does not lower yet is an expected failure naming the op.

`conftest.py` parametrizes each test over `BACKENDS` and sets the current one; the
tests read it with `current()` where the backends legitimately differ (the bounds of
`numerics_bounds.py`, or which program of a grid reports an error first).
Compiled kernels are cached per kernel text (with locations), warps and debug flag.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from tegula.backends.interpreter import execute
from tegula.ir.core import Kernel
from tegula.ir.printer import print_ir

BACKENDS = ("interpreter", "cuda", "cuda-emulated", "cpu")
COMPILED = ("cuda", "cuda-emulated")
NUM_WARPS = 4
# CI assembles every kernel the emulated runs compile for these (sm_90 means sm_90a)
PTX_CAPABILITIES = (80, 90)
# what the emulated backend lowers for, each its own parametrization
EMULATED_CAPABILITIES = (90, 80)

_state: dict[str, Any] = {"backend": "interpreter", "capability": 90}


def current() -> str:
    return _state["backend"]


def capability() -> int:
    """The compute capability the current CUDA backend lowers for (emulated: the
    parametrization's; the GPU's own is the device's)."""
    return _state["capability"]


def set_current(name: str, capability: int = 90) -> None:
    assert name in BACKENDS, name
    assert capability in EMULATED_CAPABILITIES, capability
    _state["backend"] = name
    _state["capability"] = capability


def is_compiled() -> bool:
    """True on the CUDA backends (GPU or emulator), where a grid's programs run
    concurrently and only checked (debug) mode checks bounds and assertions."""
    return current() in COMPILED


def chains_fmas() -> bool:
    """True where an f32 dot is a chain of FMAs in f32 over k (the CUDA backends, and
    the CPU backend's register-blocked micro-kernel) rather than the interpreter's
    exact sum rounded once."""
    return current() in COMPILED or current() == "cpu"


def runs_concurrently() -> bool:
    """True where a grid's programs run at the same time (the CUDA backends and the
    compiled CPU backend's thread pool): output of different programs interleaves."""
    return current() in COMPILED or current() == "cpu"


def run(kernel: Kernel, grid, *args: Any, debug: bool = False, num_warps: int = NUM_WARPS) -> None:
    g = tuple(grid) + (1,) * (3 - len(tuple(grid)))
    backend = current()
    if backend == "interpreter":
        execute(kernel, g, list(args), debug=debug)
    elif backend == "cpu":
        _cpu(kernel, debug).run(g, [_host_array(a) for a in args])
    elif backend == "cuda-emulated":
        assemble_for_ci(kernel, num_warps, debug)
        _emulated(kernel, num_warps, debug, capability()).run(g, [_host_array(a) for a in args])
    else:
        import torch
        _gpu_runner().run_on_gpu(kernel, g, args, torch, num_warps=num_warps, debug=debug)


def kernel_key(kernel: Kernel, *rest: Any) -> tuple:
    # locations are part of the key: checked mode reports them
    return (print_ir(kernel, locs=True), *rest)


_EMULATED: dict[tuple, Any] = {}
_CPU: dict[tuple, Any] = {}


def _cpu(kernel: Kernel, debug: bool) -> Any:
    """The kernel compiled by the CPU backend (bounds checks on, as by default). An op it
    cannot lower yet makes the test an expected failure that names the op: the CPU backend
    does not cover the whole language yet (issue 11), and this says where it stops."""
    from tegula.backends.cpu.backend import CpuProgram
    from tegula.backends.cpu.lower import CpuLoweringError
    key = kernel_key(kernel, debug)
    if key not in _CPU:
        try:
            _CPU[key] = CpuProgram(kernel, checked=True, debug=debug)
        except CpuLoweringError as e:
            import pytest
            pytest.xfail(f"CPU backend coverage: {e}")
    return _CPU[key]
_ASSEMBLED: dict[tuple, list[str]] = {}


def _emulated(kernel: Kernel, num_warps: int, debug: bool, capability: int) -> Any:
    from tegula.backends.cuda.emulator import EmulatedKernel
    key = kernel_key(kernel, num_warps, debug, capability)
    if key not in _EMULATED:
        _EMULATED[key] = EmulatedKernel(kernel, num_warps, debug, capability)
    return _EMULATED[key]


def assemble_for_ci(kernel: Kernel, num_warps: int, debug: bool) -> list[str]:
    """Compile `kernel` to PTX and, where ptxas is found, assemble it for each of
    `PTX_CAPABILITIES` (once per kernel text); returns the targets assembled."""
    from tegula.backends.cuda import compile_kernel
    from tegula.backends.cuda.ptxas import find_ptxas
    key = kernel_key(kernel, num_warps, debug)
    if key not in _ASSEMBLED:
        done = []
        for cap in PTX_CAPABILITIES:
            asm, md = compile_kernel(kernel, {"num_warps": num_warps, "debug": debug, "checked": debug}, cap)
            assert f".target {md['arch']}" in asm["ptx"], md["arch"]
            if find_ptxas() is not None:
                assert asm.get("cubin"), f"ptxas produced no cubin for {md['arch']}"
                done.append(md["arch"])
        _ASSEMBLED[key] = done
    return _ASSEMBLED[key]


def _host_array(a: Any) -> Any:
    """What the emulator takes for an argument: numpy arrays as they are, CPU torch
    tensors as zero-copy numpy views (bf16 and fp8 as integers of their width: the
    kernel only needs the bytes), scalars as they are."""
    if isinstance(a, np.ndarray) or not hasattr(a, "data_ptr"):
        return a
    import torch
    if a.dtype in (torch.bfloat16, torch.float16) or a.element_size() == 1 and a.is_floating_point():
        a = a.view({2: torch.int16, 1: torch.uint8}[a.element_size()])
    return a.numpy()


def _gpu_runner() -> Any:
    cuda_tests = str(Path(__file__).resolve().parents[1] / "backends" / "cuda")
    if cuda_tests not in sys.path:
        sys.path.insert(0, cuda_tests)
    import gpu_runner
    return gpu_runner
