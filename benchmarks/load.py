"""Load `kernels.py` once per compiler: as Triton code, and with `triton` → tegula.

The tegula copy is imported while `sys.modules["triton*"]` point at tegula's modules
(the same aliasing `python -m tegula.compat` does), then the real Triton modules, if
any, are put back, so one process can time both compilers side by side.
"""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

KERNELS = Path(__file__).with_name("kernels.py")


def import_file(name: str, path: "Path | str") -> ModuleType:
    """Import the Python file at `path` as module `name` (registered in sys.modules:
    Triton's JIT reads a kernel's globals through its module)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def triton_is_tegula():
    import tegula
    import tegula.language

    saved = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    for k in saved:
        del sys.modules[k]
    sys.modules["triton"] = tegula
    sys.modules["triton.language"] = tegula.language
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == "triton" or k.startswith("triton.")]:
            del sys.modules[k]
        sys.modules.update(saved)


@contextmanager
def tegula_is_triton(extra: dict | None = None):
    """The other way round: `import tegula` / `tegula.language` (and `extra` names)
    answer the real Triton's modules, so a file written for tegula (an example, the
    attention library) compiles under Triton; tegula's modules are put back after."""
    import triton
    import triton.language

    saved = {k: v for k, v in sys.modules.items() if k == "tegula" or k.startswith("tegula.")}
    for k in saved:
        del sys.modules[k]
    sys.modules.update({"tegula": triton, "tegula.language": triton.language, **(extra or {})})
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == "tegula" or k.startswith("tegula.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def load_tegula_kernels() -> ModuleType:
    with triton_is_tegula():
        return import_file("bench_kernels_tegula", KERNELS)


def load_triton_kernels() -> ModuleType | None:
    try:
        import triton  # noqa: F401
    except ImportError:
        return None
    return import_file("bench_kernels_triton", KERNELS)
