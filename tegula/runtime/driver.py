"""`tegula.runtime.driver`: which device is active and what it can do (Triton's surface).

`driver.active` is the driver of the device tegula targets by default: the CUDA driver
when a GPU is usable (cuda-bindings imports, `cuInit` succeeds, at least one device),
else the host CPU driver. The device specifics of the CUDA one (contexts, torch's or
cuda-bindings' device and stream, events, properties) are the CUDA backend's device
driver, found through the backend registry (`backend_registry.device_driver`); this
module keeps Triton's surface over it. Every driver answers what tutorials and the autotuner ask:
`get_current_device`, `set_current_device`, `get_current_stream`,
`get_active_torch_device`, `get_current_target`, `get_device_interface` (events and
`synchronize` for timing), `get_benchmarker`, and `utils.get_device_properties(device)`.

`driver` is importable both ways Triton code uses it: `from tegula.runtime import driver;
driver.active` works whether the package exports this module or the `DriverConfig`
object below, because the module forwards `active`, `default`, `set_active` and
`reset_active` to that object, and the object forwards the module's other names.

The CPU driver's properties describe the host honestly where a notion carries over (a
core is a "multiprocessor") and are nominal where it does not: `warpSize` is 1 because a
program instance is one host thread; `max_shared_mem` and `max_num_regs` are budgets the
CPU target reports so occupancy arithmetic stays finite, not hardware counts.
"""
from __future__ import annotations

import functools
import os
import platform
import sys
import time
from typing import Any, Callable, Optional

# ---------------------------------------------------------------------------- targets

def _make_target(backend: str, arch: Any, warp_size: int) -> Any:
    # Imported lazily: the compiler driver (tegula.backends.compiler) owns GPUTarget and
    # importing it pulls in the backends, which `import tegula.runtime.driver` must not.
    try:
        from tegula.backends.compiler import GPUTarget
    except ImportError:
        from collections import namedtuple

        GPUTarget = namedtuple("GPUTarget", ["backend", "arch", "warp_size"])
    return GPUTarget(backend, arch, warp_size)


# ---------------------------------------------------------------------------- backends

def _device_driver(backend: str) -> Optional[Any]:
    """The device driver of `backend` through the backend registry (the CUDA backend's
    `backends/cuda/driver.py`), or None when that backend is not installed."""
    from . import backend_registry

    return backend_registry.device_driver(backend)


# ---------------------------------------------------------------------------- host timing

class _HostEvent:
    """A host timestamp shaped like a CUDA event: `record()`, `elapsed_time(end)` in ms."""

    def __init__(self, enable_timing: bool = True) -> None:
        self._t = 0

    def record(self, stream: Any = None) -> None:
        self._t = time.perf_counter_ns()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "_HostEvent") -> float:
        return (end._t - self._t) / 1e6


class HostDeviceInterface:
    """Device interface of the CPU: work is synchronous, so events are clock readings."""

    Event = _HostEvent

    @staticmethod
    def synchronize(device: Any = None) -> None:
        pass

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def is_available() -> bool:
        return True


# ---------------------------------------------------------------------------- drivers

class DriverBase:
    """What every device driver answers. `is_active()` says whether it can run here."""

    backend: str = ""

    @classmethod
    def is_active(cls) -> bool:
        raise NotImplementedError

    def __init__(self) -> None:
        self.utils = self._make_utils()

    def _make_utils(self) -> Any:
        raise NotImplementedError

    def get_benchmarker(self) -> Callable[..., Any]:
        from tegula import testing

        return functools.partial(testing.do_bench, device=self.backend)

    def __repr__(self) -> str:
        return f"<tegula {self.backend} driver>"


class CudaUtils:
    """Device queries, answered by the CUDA backend's driver."""

    def __init__(self, dev: Any) -> None:
        self._dev = dev

    def get_device_properties(self, device: int = 0) -> dict[str, Any]:
        return self._dev.get_device_properties(int(device))


class CudaDriver(DriverBase):
    """NVIDIA GPUs: the CUDA backend's device driver (cuda-bindings), which defers to
    torch's device and stream when the program uses torch."""

    backend = "cuda"

    @classmethod
    def is_active(cls) -> bool:
        dev = _device_driver("cuda")
        if dev is None:
            return False
        # torch's answer first, as Triton's driver does: it needs no CUDA context, so it
        # also holds in a process forked from one that initialised CUDA (PyTorch
        # Inductor's compile workers), where a driver call would fail
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return True
        return bool(dev.is_usable())

    def __init__(self) -> None:
        dev = _device_driver("cuda")
        if dev is None:
            from .backend_registry import why_unavailable

            raise RuntimeError(f"the CUDA driver is not available: {why_unavailable('cuda')}")
        self._dev = dev
        super().__init__()

    def _make_utils(self) -> CudaUtils:
        return CudaUtils(self._dev)

    def get_current_device(self) -> int:
        return self._dev.get_current_device()

    def set_current_device(self, device: int) -> None:
        self._dev.set_current_device(device)

    def get_current_stream(self, device: Optional[int] = None) -> int:
        return self._dev.get_current_stream(device)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cuda", self.get_current_device())

    def get_current_target(self) -> Any:
        props = self.utils.get_device_properties(self.get_current_device())
        major, minor = props["capability"]
        return _make_target("cuda", major * 10 + minor, props["warpSize"])

    def get_device_interface(self) -> Any:
        return self._dev.get_device_interface()

    def get_empty_cache_for_benchmark(self) -> Any:
        return self._dev.get_empty_cache_for_benchmark()

    def clear_cache(self, cache: Any) -> None:
        self._dev.clear_cache(cache)


class CpuUtils:
    """Host "device" queries; see the module docstring for which values are nominal."""

    @staticmethod
    def get_device_properties(device: int = 0) -> dict[str, Any]:
        return {
            "max_shared_mem": 1 << 20,
            "max_num_regs": 1 << 16,
            "multiprocessor_count": os.cpu_count() or 1,
            "warpSize": 1,
            "sm_clock_rate": 0,
            "mem_clock_rate": 0,
            "mem_bus_width": 0,
            "name": platform.processor() or platform.machine() or "cpu",
        }


class CpuDriver(DriverBase):
    """The host. Always active; numpy arrays and CPU tensors run here."""

    backend = "cpu"

    @classmethod
    def is_active(cls) -> bool:
        return True

    def _make_utils(self) -> CpuUtils:
        return CpuUtils()

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        if int(device) != 0:
            raise ValueError(f"the CPU driver has one device (0), not {device}")

    def get_current_stream(self, device: Optional[int] = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_current_target(self) -> Any:
        return _make_target("cpu", platform.machine() or "host", 1)

    def get_device_interface(self) -> Any:
        return HostDeviceInterface

    def get_empty_cache_for_benchmark(self) -> Any:
        # Flushing host caches (a memset larger than the L3) would cost more than most
        # interpreted kernels and dominate the benchmark; the CPU path skips it.
        return None

    def clear_cache(self, cache: Any) -> None:
        pass


_DRIVERS: tuple[type[DriverBase], ...] = (CudaDriver, CpuDriver)


class DriverConfig:
    """`driver.active` (lazily chosen, overridable with `set_active`) and `driver.default`."""

    def __init__(self) -> None:
        self._default: Optional[DriverBase] = None
        self._active: Optional[DriverBase] = None
        self._instances: dict[str, DriverBase] = {}

    def for_backend(self, backend: str) -> DriverBase:
        """The driver of `backend` ("cuda" or "cpu"), whether or not it is the active one."""
        if backend not in self._instances:
            for cls in _DRIVERS:
                if cls.backend == backend:
                    self._instances[backend] = cls()
                    break
            else:
                raise ValueError(f"unknown backend '{backend}' (known: cuda, cpu)")
        return self._instances[backend]

    @property
    def default(self) -> DriverBase:
        if self._default is None:
            cls = next(c for c in _DRIVERS if c.is_active())
            self._default = self.for_backend(cls.backend)
        return self._default

    @property
    def active(self) -> DriverBase:
        return self._active if self._active is not None else self.default

    def set_active(self, drv: DriverBase) -> None:
        self._active = drv

    def reset_active(self) -> None:
        self._active = None

    def __getattr__(self, name: str) -> Any:
        # `tegula.runtime.driver` is this object when the package re-exports it (as Triton
        # does), which hides the module; forward the module's names (CudaDriver, ...).
        try:
            return globals()[name]
        except KeyError:
            raise AttributeError(f"'DriverConfig' object has no attribute {name!r}") from None


driver = DriverConfig()


def __getattr__(name: str) -> Any:
    # Module-level forwarding so `tegula.runtime.driver.active` works when the package
    # exposes this module rather than the DriverConfig object (see module docstring).
    if name in ("active", "default"):
        return getattr(driver, name)
    if name in ("set_active", "reset_active", "for_backend"):
        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
