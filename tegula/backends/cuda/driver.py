"""The CUDA driver through NVIDIA's cuda-bindings (`cuda.bindings.driver`), the only
module that talks to it: the primary context of each device (the one torch and CuPy use
too), module loading (cubin, or PTX for the driver's JIT when no ptxas was found), >48
KB dynamic shared memory opt-in, device queries, and the error type every failing
driver call raises.

It is also the CUDA backend's *device driver* (`CudaBackend.device_driver()`), which
`tegula.runtime.driver` reaches through the backend registry and delegates Triton's
`triton.runtime.driver.active` device specifics to: `is_usable`, the current device
and stream (torch's when the program uses torch, else the current context's and the
default stream), `get_device_properties`, `get_device_interface` (`torch.cuda`, or
`DeviceInterface`: cuda-bindings events and synchronization for programs without
torch) and the L2-flushing buffer of benchmarks."""
from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Optional

from ...errors import OutOfResources, TegulaError

_lock = threading.Lock()
_contexts: dict[int, Any] = {}
DEFAULT_SHARED_LIMIT = 48 * 1024
L2_FLUSH_BYTES = 256 * 1000 * 1000  # Triton's figure: larger than any current L2


class CudaDriverError(TegulaError, RuntimeError):
    """A CUDA driver call failed; the message has the call and the error name."""


@functools.lru_cache(maxsize=None)
def cu() -> Any:
    """`cuda.bindings.driver`, initialised."""
    from cuda.bindings import driver

    (err,) = driver.cuInit(0)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudaDriverError(f"cuInit failed: {error_name(driver, err)}")
    return driver


def error_name(driver: Any, err: Any) -> str:
    try:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        return f"{name.decode()} ({text.decode()})"
    except Exception:  # an error inside error reporting: show what we have
        return str(err)


def check(result: Any, what: str = "CUDA driver call") -> Any:
    """The values of a cuda-bindings call (a tuple led by the error code)."""
    driver = cu()
    err = result[0]
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudaDriverError(f"{what} failed: {error_name(driver, err)}")
    rest = result[1:]
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def available() -> tuple[bool, str]:
    try:
        driver = cu()
    except ImportError as e:
        return False, f"cuda-bindings is not installed ({e})"
    except Exception as e:  # no libcuda, no driver: no GPU here
        return False, f"the CUDA driver is not usable ({e})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return False, "no CUDA GPU found"
    return True, ""


def current_device() -> int:
    """The device torch considers current (when torch has initialised CUDA), else 0."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


def device_count() -> int:
    return int(check(cu().cuDeviceGetCount(), "cuDeviceGetCount"))


def attribute(device: int, name: str) -> int:
    driver = cu()
    attr = getattr(driver.CUdevice_attribute, name)
    dev = check(driver.cuDeviceGet(device), "cuDeviceGet")
    return int(check(driver.cuDeviceGetAttribute(attr, dev), f"cuDeviceGetAttribute({name})"))


@functools.lru_cache(maxsize=None)
def capability(device: int) -> int:
    major = attribute(device, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
    minor = attribute(device, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
    return major * 10 + minor


@functools.lru_cache(maxsize=None)
def max_shared_optin(device: int) -> int:
    return attribute(device, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")


def context(device: int) -> Any:
    """Make the device's primary context current (retaining it once) and return it."""
    driver = cu()
    with _lock:
        ctx = _contexts.get(device)
        if ctx is None:
            dev = check(driver.cuDeviceGet(device), "cuDeviceGet")
            ctx = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
            _contexts[device] = ctx
    current = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if current is None or int(current) != int(ctx):
        check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def load_function(image: bytes, name: str, device: int, shared: int) -> tuple[Any, Any]:
    """(module, function) of `image` (a cubin, or NUL-terminated PTX) on `device`, with
    the dynamic shared-memory limit raised to `shared` bytes when above 48 KB."""
    driver = cu()
    context(device)
    limit = max_shared_optin(device)
    if shared > limit:
        raise OutOfResources(shared, limit, "shared memory")
    module = check(driver.cuModuleLoadData(image), f"loading the module of kernel '{name}'")
    fn = check(driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
    if shared > DEFAULT_SHARED_LIMIT:
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(driver.cuFuncSetAttribute(fn, attr, shared), "cuFuncSetAttribute(max dynamic shared)")
    return module, fn


def ensure_context(device: Optional[int] = None) -> None:
    """Make sure a context is current: the one already current when `device` is None
    (a cuda-bindings user's own), else the primary context of `device` (0 by default)."""
    if device is None:
        current = check(cu().cuCtxGetCurrent(), "cuCtxGetCurrent")
        if current is not None and int(current) != 0:
            return
    context(device or 0)


# ---------------------------------------------------------------- device driver

def is_usable() -> bool:
    """Whether kernels can run here (cuda-bindings, a driver and a GPU)."""
    return available()[0]


@functools.lru_cache(maxsize=None)
def _torch_cuda() -> Optional[Any]:
    """`torch` when it is installed with a usable CUDA, else None (imported on demand)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _torch_in_use() -> Optional[Any]:
    # Defer to torch's device/stream state only when the program already imported torch:
    # a CuPy or cuda-bindings user should not pay torch's import time on every query.
    return _torch_cuda() if "torch" in sys.modules else None


class Event:
    """A CUDA event through cuda-bindings, shaped like `torch.cuda.Event`."""

    def __init__(self, enable_timing: bool = True) -> None:
        driver = cu()
        ensure_context()
        flags = driver.CUevent_flags
        flags = flags.CU_EVENT_DEFAULT if enable_timing else flags.CU_EVENT_DISABLE_TIMING
        self._event = check(driver.cuEventCreate(flags), "cuEventCreate")

    def record(self, stream: Any = None) -> None:
        check(cu().cuEventRecord(self._event, stream if stream is not None else 0), "cuEventRecord")

    def synchronize(self) -> None:
        check(cu().cuEventSynchronize(self._event), "cuEventSynchronize")

    def elapsed_time(self, end: "Event") -> float:
        end.synchronize()
        return float(check(cu().cuEventElapsedTime(self._event, end._event), "cuEventElapsedTime"))

    def __del__(self) -> None:
        try:
            cu().cuEventDestroy(self._event)
        except Exception:  # interpreter shutdown or a dead context: nothing to free
            pass


class DeviceInterface:
    """The slice of `torch.cuda` that benchmarking uses, for programs without torch."""

    Event = Event

    @staticmethod
    def synchronize(device: Any = None) -> None:
        ensure_context()
        check(cu().cuCtxSynchronize(), "cuCtxSynchronize")

    @staticmethod
    def current_device() -> int:
        ensure_context()
        return int(check(cu().cuCtxGetDevice(), "cuCtxGetDevice"))

    @staticmethod
    def is_available() -> bool:
        return is_usable()


def get_current_device() -> int:
    torch = _torch_in_use()
    if torch is not None:
        return int(torch.cuda.current_device())
    return DeviceInterface.current_device()


def set_current_device(device: int) -> None:
    torch = _torch_in_use()
    if torch is not None:
        torch.cuda.set_device(device)
    else:
        ensure_context(int(device))


def get_current_stream(device: Optional[int] = None) -> int:
    torch = _torch_in_use()
    if torch is not None:
        if device is None:
            device = torch.cuda.current_device()
        # torch's raw getter: torch.cuda.current_stream() builds a Stream object per call
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw(device)
        return torch.cuda.current_stream(device).cuda_stream
    return 0  # the legacy default stream, which is what cuda-bindings users launch on


def get_device_interface() -> Any:
    torch = _torch_cuda()
    return torch.cuda if torch is not None else DeviceInterface


@functools.lru_cache(maxsize=None)
def get_device_properties(device: int = 0) -> dict[str, Any]:
    """Triton's `driver.active.utils.get_device_properties(device)`, plus `capability`
    (major, minor) and `name`."""
    if not is_usable():
        raise CudaDriverError(f"no CUDA device is available: {available()[1]}")
    driver = cu()
    dev = check(driver.cuDeviceGet(int(device)), "cuDeviceGet")
    raw_name = check(driver.cuDeviceGetName(256, dev), "cuDeviceGetName")

    def get(name: str) -> int:
        return attribute(int(device), name)

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


def get_empty_cache_for_benchmark() -> Any:
    """A buffer larger than the L2, which `clear_cache` overwrites between runs."""
    torch = _torch_cuda()
    if torch is not None:
        return torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int, device="cuda")
    ensure_context()
    return check(cu().cuMemAlloc(L2_FLUSH_BYTES), "cuMemAlloc")


def clear_cache(cache: Any) -> None:
    if hasattr(cache, "zero_"):
        cache.zero_()
    else:
        check(cu().cuMemsetD32Async(cache, 0, L2_FLUSH_BYTES // 4, 0), "cuMemsetD32Async")
