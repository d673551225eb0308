"""`tegula.runtime`: launching kernels (`jit`, `JITFunction`), the compiler driver, the
caches, autotuning and heuristics, and the device `driver` (Triton's `triton.runtime`)."""
from ..errors import OutOfResources
from .args import MockTensor, TensorWrapper, reinterpret
from .autotuner import Autotuner, Config, autotune
from .driver import driver
from .heuristics import Heuristics, heuristics

# `jit` is not re-exported: `tegula.runtime.jit` is the module, as `triton.runtime.jit`
# is (PyTorch reads `triton.runtime.jit.ConstexprFunction`, `.create_specialize_impl`)
from .jit import JITFunction, KernelParam
from .kernel_interface import KernelInterface

__all__ = [
    "Autotuner", "Config", "Heuristics", "JITFunction", "KernelInterface", "KernelParam",
    "MockTensor", "OutOfResources", "TensorWrapper", "autotune", "driver", "heuristics",
    "reinterpret",
]
