"""The CUDA driver through NVIDIA's cuda-bindings (`cuda.bindings.driver`): the primary
context of each device (the one torch and CuPy use too), module loading (cubin, or PTX
for the driver's JIT when no ptxas was found), >48 KB dynamic shared memory opt-in,
device queries, and the error type every failing driver call raises."""
from __future__ import annotations

import functools
import sys
import threading
from typing import Any

from ...errors import OutOfResources, TegulaError

_lock = threading.Lock()
_contexts: dict[int, Any] = {}
DEFAULT_SHARED_LIMIT = 48 * 1024


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
