"""The CUDA backend behind the runtime's backend protocol (`runtime/backend_registry`):
availability, the target of a device, compile (through the stage emitter), load
(module + function on the device, then the generated launcher), and the device driver
behind `triton.runtime.driver.active` (`driver`)."""
from __future__ import annotations

from typing import Any

from . import driver as drv
from .compiler import compile_kernel


def _gpu_target(arch: int) -> Any:
    from ..compiler import GPUTarget

    return GPUTarget("cuda", arch, 32)


class CudaBackend:
    name = "cuda"
    binary_stage = "cubin"
    disk_cacheable = True

    def available(self) -> tuple[bool, str]:
        """Whether kernels can run here (cuda-bindings, a driver and a GPU)."""
        return drv.available()

    def compile_available(self) -> tuple[bool, str]:
        """Whether kernels can be compiled here (always: LLVM's NVPTX backend ships with
        llvmlite; ptxas is optional), for ahead-of-time compiles without a GPU."""
        return True, ""

    def current_target(self, device: int) -> Any:
        return _gpu_target(drv.capability(device))

    def device_driver(self) -> Any:
        """The device queries `tegula.runtime.driver` delegates to (see `driver`)."""
        return drv

    def compile(self, kernel: Any, options: Any, target: Any, io: Any) -> tuple[dict, dict]:
        emit = io.emit if io is not None else None
        return compile_kernel(kernel, options, target, emit)

    def load(self, compiled: Any, device: Any) -> Any:
        from .launcher import make_launcher

        md = compiled.metadata
        dev = drv.current_device() if device is None or device < 0 else int(device)
        image = compiled.asm.get("cubin")
        if image is None:  # no ptxas at compile time: the driver JIT-compiles the PTX
            image = compiled.asm["ptx"].encode() + b"\0"
        _module, fn = drv.load_function(image, md.name, dev, int(md.shared or 0))
        launch = make_launcher(fn, md, md.arg_types, dev, indices=md.arg_indices, arg_names=md.arg_names)
        launch._tegula_module = _module  # keep the module loaded as long as the launcher lives
        return launch


def make_backend() -> CudaBackend:
    return CudaBackend()
