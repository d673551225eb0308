"""`tegula.runtime.driver`: which device is active and what it can do (Triton's surface).

`driver.active` is the driver of the device tegula targets by default: the CUDA driver
when a GPU is usable (cuda-bindings imports, `cuInit` succeeds, at least one device),
else the host CPU driver. Every driver answers what tutorials and the autotuner ask:
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

_L2_FLUSH_BYTES = 256 * 1000 * 1000  # Triton's figure: larger than any current L2.


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


# ---------------------------------------------------------------------------- cuda-bindings

@functools.lru_cache(maxsize=None)
def _cuda() -> Optional[Any]:
    """The `cuda.bindings.driver` module with `cuInit` done, or None when no GPU is usable."""
    try:
        from cuda.bindings import driver as cu

        (err,) = cu.cuInit(0)
        if err != cu.CUresult.CUDA_SUCCESS:
            return None
        err, count = cu.cuDeviceGetCount()
        if err != cu.CUresult.CUDA_SUCCESS or count == 0:
            return None
        return cu
    except Exception:  # no package, no libcuda, no device: all mean "no GPU"
        return None


def _check(result: tuple) -> Any:
    cu = _cuda()
    err, *rest = result
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        raise RuntimeError(f"CUDA driver call failed: {name.decode() if isinstance(name, bytes) else name}")
    return rest[0] if len(rest) == 1 else tuple(rest)


@functools.lru_cache(maxsize=None)
def _torch_cuda() -> Optional[Any]:
    """`torch` when it is installed with a usable CUDA, else None (imported on demand)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _torch_in_use() -> Optional[Any]:
    # Only defer to torch's device/stream state when the program already imported torch:
    # a CuPy or cuda-bindings user should not pay torch's import time on every query.
    return _torch_cuda() if "torch" in sys.modules else None


class _BindingsEvent:
    """A CUDA event through cuda-bindings, shaped like `torch.cuda.Event`."""

    def __init__(self, enable_timing: bool = True) -> None:
        cu = _cuda()
        _ensure_context()
        flags = cu.CUevent_flags
        flags = flags.CU_EVENT_DEFAULT if enable_timing else flags.CU_EVENT_DISABLE_TIMING
        self._event = _check(cu.cuEventCreate(flags))

    def record(self, stream: Any = None) -> None:
        _check(_cuda().cuEventRecord(self._event, stream if stream is not None else 0))

    def synchronize(self) -> None:
        _check(_cuda().cuEventSynchronize(self._event))

    def elapsed_time(self, end: "_BindingsEvent") -> float:
        end.synchronize()
        return float(_check(_cuda().cuEventElapsedTime(self._event, end._event)))

    def __del__(self) -> None:
        try:
            _cuda().cuEventDestroy(self._event)
        except Exception:
            pass


@functools.lru_cache(maxsize=None)
def _primary_context(ordinal: int) -> Any:
    cu = _cuda()
    dev = _check(cu.cuDeviceGet(ordinal))
    return _check(cu.cuDevicePrimaryCtxRetain(dev))


def _ensure_context(ordinal: Optional[int] = None) -> None:
    cu = _cuda()
    ctx = _check(cu.cuCtxGetCurrent())
    if ordinal is None and ctx is not None and int(ctx) != 0:
        return
    _check(cu.cuCtxSetCurrent(_primary_context(ordinal or 0)))


class _BindingsDeviceInterface:
    """The slice of `torch.cuda` that benchmarking uses, for programs without torch."""

    Event = _BindingsEvent

    @staticmethod
    def synchronize(device: Any = None) -> None:
        _ensure_context()
        _check(_cuda().cuCtxSynchronize())

    @staticmethod
    def current_device() -> int:
        _ensure_context()
        return int(_check(_cuda().cuCtxGetDevice()))

    @staticmethod
    def is_available() -> bool:
        return _cuda() is not None


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
    """Device queries through the CUDA driver API."""

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def get_device_properties(device: int = 0) -> dict[str, Any]:
        cu = _cuda()
        if cu is None:
            raise RuntimeError("no CUDA device is available")
        dev = _check(cu.cuDeviceGet(int(device)))
        attr = cu.CUdevice_attribute

        def get(name: str) -> int:
            return int(_check(cu.cuDeviceGetAttribute(getattr(attr, name), dev)))

        raw_name = _check(cu.cuDeviceGetName(256, dev))
        return {
            "max_shared_mem": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            "max_num_regs": get("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
            "multiprocessor_count": get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            "warpSize": get("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
            "sm_clock_rate": get("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
            "mem_clock_rate": get("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"),
            "mem_bus_width": get("CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"),
            "l2_cache_size": get("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
            "capability": (get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                           get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")),
            "name": bytes(raw_name).split(b"\0", 1)[0].decode(errors="replace"),
        }


class CudaDriver(DriverBase):
    """NVIDIA GPUs through cuda-bindings; defers to torch's device and stream when in use."""

    backend = "cuda"

    @classmethod
    def is_active(cls) -> bool:
        return _cuda() is not None

    def _make_utils(self) -> CudaUtils:
        return CudaUtils()

    def get_current_device(self) -> int:
        torch = _torch_in_use()
        if torch is not None:
            return torch.cuda.current_device()
        return _BindingsDeviceInterface.current_device()

    def set_current_device(self, device: int) -> None:
        torch = _torch_in_use()
        if torch is not None:
            torch.cuda.set_device(device)
        else:
            _ensure_context(int(device))

    def get_current_stream(self, device: Optional[int] = None) -> int:
        torch = _torch_in_use()
        if torch is not None:
            if device is None:
                device = torch.cuda.current_device()
            return torch.cuda.current_stream(device).cuda_stream
        return 0  # the legacy default stream, which is what cuda-bindings users launch on

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cuda", self.get_current_device())

    def get_current_target(self) -> Any:
        props = self.utils.get_device_properties(self.get_current_device())
        major, minor = props["capability"]
        return _make_target("cuda", major * 10 + minor, props["warpSize"])

    def get_device_interface(self) -> Any:
        torch = _torch_cuda()
        return torch.cuda if torch is not None else _BindingsDeviceInterface

    def get_empty_cache_for_benchmark(self) -> Any:
        torch = _torch_cuda()
        if torch is not None:
            return torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int, device="cuda")
        _ensure_context()
        return _check(_cuda().cuMemAlloc(_L2_FLUSH_BYTES))

    def clear_cache(self, cache: Any) -> None:
        if hasattr(cache, "zero_"):
            cache.zero_()
        else:
            _check(_cuda().cuMemsetD32Async(cache, 0, _L2_FLUSH_BYTES // 4, 0))


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
