"""The backends the compiler driver can hand tile IR to, and the protocol they follow.

A backend is found by name (`GPUTarget.backend`): `"interpreter"` (the numpy reference,
always present), `"cpu"` and `"cuda"` (compiled backends, present when their package
imports). Factories are looked up lazily so that `import tegula` imports no backend;
a backend whose module is missing is *unavailable* and the error says why.

The protocol (see docs/internals.md, "backends"):

    class Backend(Protocol):
        name: str                     # the registry name, == GPUTarget.backend
        binary_stage: str | None      # asm key of the loadable artifact ("cubin"), if any
        disk_cacheable: bool          # may compile() results be stored in the disk cache?
        def available(self) -> tuple[bool, str]          # (usable here?, why not)
        def current_target(self, device: int) -> GPUTarget
        def compile(self, kernel, options, target, io) -> tuple[dict[str, str | bytes], dict]
        def load(self, compiled: CompiledKernel, device: int) -> Launcher
        def device_driver(self) -> DeviceDriver      # optional: see `device_driver` below
        ignored_options: tuple[str, ...]  # optional: launch options its code does not depend
                                          # on (num_warps on the CPU); the autotuner times
                                          # configs differing only in these once

    Launcher = Callable[[tuple[int, int, int], Sequence[Any]], None]
        # launcher(grid, values): `values` holds one value per parameter of the kernel
        # (constexpr slots included, as Triton's launcher gets them); the runtime
        # arguments are at `compiled.metadata.arg_indices`. A launcher with
        # `accepts_pointers = True` is called as launcher(grid, values, *pointers), with
        # the data_ptr() of each torch tensor value the launch path already read
        # (None elsewhere; none at all outside the JIT path): see runtime/kernel.py.
"""
from __future__ import annotations

import importlib
import threading
from typing import Any, Callable, Optional, Protocol, Sequence

from ..backends.compiler import GPUTarget
from ..errors import TegulaError
from .specialization import CPU_DEVICE, NEUTRAL_DEVICE

Launcher = Callable[[tuple, Sequence[Any]], None]


class Backend(Protocol):
    name: str
    binary_stage: Optional[str]
    disk_cacheable: bool

    def available(self) -> tuple[bool, str]: ...

    def current_target(self, device: int) -> GPUTarget: ...

    def compile(self, kernel: Any, options: Any, target: GPUTarget,
                io: Any) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def load(self, compiled: Any, device: int) -> Launcher: ...


class BackendUnavailableError(TegulaError, RuntimeError):
    """The arguments or the target need a backend that cannot run here."""


# name -> "module:factory" (a zero-argument callable returning the backend object)
_FACTORIES: dict[str, str | Callable[[], Any]] = {
    "interpreter": "tegula.runtime.interpreter_backend:InterpreterBackend",
    "cpu": "tegula.backends.cpu:make_backend",
    "cuda": "tegula.backends.cuda:make_backend",
}
_INSTANCES: dict[str, Any] = {}
_MISSING: dict[str, str] = {}
_LOCK = threading.Lock()


def register_backend(name: str, factory: str | Callable[[], Any]) -> None:
    """Register (or replace) the factory of backend `name`; forgets any instance made."""
    with _LOCK:
        _FACTORIES[name] = factory
        _INSTANCES.pop(name, None)
        _MISSING.pop(name, None)


def _resolve_factory(name: str) -> tuple[Optional[Callable[[], Any]], str]:
    """The factory of backend `name` (importing its module), or None and why not."""
    factory = _FACTORIES.get(name)
    if factory is None:
        return None, f"there is no backend named '{name}' (known: {', '.join(sorted(_FACTORIES))})"
    if isinstance(factory, str):
        module_name, _, attr = factory.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            # Only the backend's own module being absent means "not installed"; a missing
            # dependency deeper down is reported with its name.
            if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
                return None, f"the '{name}' backend is not part of this installation ({module_name})"
            return None, f"the '{name}' backend needs a package that is missing: {e.name}"
        factory = getattr(module, attr, None)
        if factory is None:
            return None, f"{module_name} has no '{attr}'"
    return factory, ""


def _make(name: str) -> tuple[Optional[Any], str]:
    factory, why = _resolve_factory(name)
    if factory is None:
        return None, why
    backend = factory()
    ok, why = backend.available()
    if not ok:
        return None, why
    return backend, ""


def find_backend(name: str) -> Optional[Any]:
    """The backend called `name`, or None when it is unavailable here (cached)."""
    inst = _INSTANCES.get(name)
    if inst is not None:
        return inst
    if name in _MISSING:
        return None
    with _LOCK:
        if name not in _INSTANCES and name not in _MISSING:
            backend, why = _make(name)
            if backend is None:
                _MISSING[name] = why
            else:
                _INSTANCES[name] = backend
    return _INSTANCES.get(name)


def get_backend(name: str) -> Any:
    """The backend called `name`; raises BackendUnavailableError saying why not."""
    backend = find_backend(name)
    if backend is None:
        raise BackendUnavailableError(f"backend '{name}' is not available: {_MISSING.get(name, '')}")
    return backend


def device_driver(name: str) -> Optional[Any]:
    """The device driver of backend `name` — what `tegula.runtime.driver` asks about
    devices, streams, events and properties (backends/cuda/driver.py is the one there
    is) — whether or not a device is usable here; None when the backend is not
    installed or has no devices of its own. The registered instance's, when there is
    one (so a test's fake backend is asked too)."""
    backend = _INSTANCES.get(name) or _COMPILE_ONLY.get(name)
    if backend is None:
        factory, _why = _resolve_factory(name)
        if factory is None:
            return None
        backend = factory()
    get = getattr(backend, "device_driver", None)
    return get() if get is not None else None


def why_unavailable(name: str) -> str:
    find_backend(name)
    return _MISSING.get(name, "")


def backend_for_device(device: int, interpret: bool, kernel: str = "",
                       arg: str = "") -> tuple[Any, int]:
    """(backend, device) that runs a launch whose arrays live on `device`.

    `interpret` (TEGULA_INTERPRET) forces the interpreter. Host memory runs on the `cpu`
    backend when it is installed, else the interpreter. GPU memory needs the `cuda`
    backend. With no array arguments (`NEUTRAL_DEVICE`), the GPU is used when the cuda
    backend is available, else the host."""
    if interpret:
        return get_backend("interpreter"), device
    if device == NEUTRAL_DEVICE:
        cuda = find_backend("cuda")
        if cuda is not None:
            return cuda, _current_cuda_device()
        device = CPU_DEVICE
    if device == CPU_DEVICE:
        cpu = _host_backend()
        return (cpu if cpu is not None else get_backend("interpreter")), CPU_DEVICE
    cuda = find_backend("cuda")
    if cuda is None:
        what = f"argument '{arg}' of kernel '{kernel}' is on cuda:{device}" if arg else f"cuda:{device}"
        raise BackendUnavailableError(
            f"no CUDA backend/GPU available: {what}, but {why_unavailable('cuda')}. "
            "Pass host arrays (numpy, CPU tensors) to run on the CPU, or set TEGULA_INTERPRET=1 "
            "to run the reference interpreter on copies of the GPU data")
    return cuda, device


def _current_cuda_device() -> int:
    try:
        from .driver import driver

        return int(driver.active.get_current_device()) if driver.active.backend == "cuda" else 0
    except Exception:  # no driver: the first GPU
        return 0


_COMPILE_ONLY: dict[str, Any] = {}


def backend_for_target(target: GPUTarget) -> Any:
    """The backend that compiles for `target`. Ahead-of-time compilation needs no device:
    a backend that cannot run here (no GPU) still compiles when its `compile_available()`
    says its toolchain is present. A host target (`GPUTarget("cpu", ...)`, what Triton's
    CPU backend and PyTorch's Inductor ask for) is served by the compiled CPU backend
    when it is enabled, else by the interpreter, as host arrays are at launch."""
    if target.backend == "cpu":
        from ..config import knobs

        cpu = None if knobs.interpret else _host_backend()
        return cpu if cpu is not None else get_backend("interpreter")
    backend = find_backend(target.backend)
    if backend is not None:
        return backend
    with _LOCK:
        if target.backend not in _COMPILE_ONLY:
            factory, _why = _resolve_factory(target.backend)
            candidate = factory() if factory is not None else None
            check = getattr(candidate, "compile_available", None)
            if candidate is not None and check is not None and check()[0]:
                _COMPILE_ONLY[target.backend] = candidate
    if target.backend in _COMPILE_ONLY:
        return _COMPILE_ONLY[target.backend]
    return get_backend(target.backend)


def default_target() -> GPUTarget:
    """What `compile(src)` without a target compiles for: the active device's target."""
    cuda = find_backend("cuda")
    if cuda is not None:
        return cuda.current_target(_current_cuda_device())
    cpu = _host_backend()
    if cpu is not None:
        return cpu.current_target(CPU_DEVICE)
    return get_backend("interpreter").current_target(CPU_DEVICE)


def _host_backend() -> Optional[Any]:
    """The `cpu` backend when it runs host memory now: a backend that is `opt_in`
    (the compiled CPU backend) only while its knob is on (the default; off with
    TEGULA_CPU_BACKEND=0). Asked at every launch, not
    cached like availability, so the knob can change within a process."""
    cpu = find_backend("cpu")
    if cpu is not None and getattr(cpu, "opt_in", False):
        from ..config import knobs

        return cpu if knobs.cpu_backend else None
    return cpu
