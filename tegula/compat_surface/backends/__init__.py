"""`triton.backends`: the installed backends, as Triton 3.6 lists them.

`backends` maps a Triton backend name to `Backend(compiler, driver)`: `compiler` is a
`BaseBackend` subclass (what `triton.compiler.compiler.make_backend(target)`
instantiates) and `driver` a driver class whose `is_active()` says whether it can run
here. tegula lists:

- `"nvidia"`: the CUDA backend (`CudaCompilerBackend`, tegula's `CudaDriver`), present
  whenever tegula's CUDA backend is part of the installation (it compiles without a
  GPU); `driver.is_active()` is true only where a GPU is usable.
- `"cpu"`: the host (`CpuCompilerBackend`, tegula's `CpuDriver`, always active). Kernels
  compiled for `GPUTarget("cpu", ...)` run on tegula's compiled CPU backend (unless
  `TEGULA_CPU_BACKEND=0` or `TEGULA_INTERPRET=1`: the reference interpreter).

PyTorch reads this to decide whether Triton can serve a device
(`"cpu" in triton.backends.backends` lets `torch._inductor.config.cpu_backend =
"triton"` run Inductor's kernels on tegula).
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from .compiler import BaseBackend, CpuCompilerBackend, CudaCompilerBackend
from .driver import DriverBase


@dataclass(frozen=True)
class Backend:
    compiler: type
    driver: type


def _discover_backends() -> dict[str, Backend]:
    from ...runtime.driver import CpuDriver, CudaDriver

    found: dict[str, Backend] = {}
    if importlib.util.find_spec("tegula.backends.cuda") is not None:
        found["nvidia"] = Backend(CudaCompilerBackend, CudaDriver)
    found["cpu"] = Backend(CpuCompilerBackend, CpuDriver)
    return found


backends: dict[str, Backend] = _discover_backends()

__all__ = ["Backend", "BaseBackend", "DriverBase", "backends"]
