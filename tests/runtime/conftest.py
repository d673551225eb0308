"""Fixtures for the runtime's unit tests: a fake compiler pipeline and fake backends.

`fake` replaces the frontend, the IR printer/parser, the pass pipeline and the
written-arguments analysis seen by the compiler driver, and puts recording backends
in the registry ("interpreter" for host memory, and "cuda" when a test asks for it),
so these tests exercise the runtime alone: specialization, caching, grids, errors,
dump/override, and the disk cache.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from tegula.backends.compiler import GPUTarget
from tegula.runtime import backend_registry, compiler
from tegula.runtime.jit import JITFunction


@dataclass
class FakeBackend:
    name: str = "interpreter"
    disk_cacheable: bool = False
    binary_stage: Any = None
    arch: Any = "fake"
    compiles: list = field(default_factory=list)
    launches: list = field(default_factory=list)
    loads: list = field(default_factory=list)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def current_target(self, device: int) -> GPUTarget:
        return GPUTarget(self.name, self.arch, 32 if self.name == "cuda" else 1)

    def compile(self, kernel: Any, options: Any, target: GPUTarget, io: Any) -> tuple[dict, dict]:
        self.compiles.append((kernel, options, target))
        text = io.emit("fakeasm", f"asm of {kernel.name} num_warps={options.num_warps}")
        asm = {"fakeasm": text}
        if self.binary_stage:
            asm[self.binary_stage] = b"\x00binary"
        return asm, {"shared": 128, "n_regs": 32}

    def load(self, compiled: Any, device: Any):
        self.loads.append((compiled, device))

        def launch(grid: tuple, values: Any) -> None:
            self.launches.append((compiled, grid, tuple(values)))

        return launch


@dataclass
class FakePipeline:
    frontend_calls: list = field(default_factory=list)
    parsed: list = field(default_factory=list)
    host: FakeBackend = field(default_factory=FakeBackend)
    cuda: FakeBackend = field(default_factory=lambda: FakeBackend(name="cuda", arch=90))

    def enable_cuda(self, monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
        monkeypatch.setitem(backend_registry._INSTANCES, "cuda", self.cuda)
        monkeypatch.delitem(backend_registry._MISSING, "cuda", raising=False)
        return self.cuda

    @property
    def launches(self) -> list:
        return self.host.launches


def _fake_kernel(name: str, signature: dict, constexprs: dict, attrs: dict, options: Any) -> Any:
    return SimpleNamespace(name=name, signature=dict(signature), constexprs=dict(constexprs),
                           attrs=dict(attrs), options=options, optimized=False)


def _clear_module_kernels(module: Any) -> None:
    # Kernels defined at module level keep compiled kernels (bound to the previous
    # test's fake backend) in their in-memory cache: start each test afresh.
    for value in vars(module).values():
        if isinstance(value, JITFunction):
            value.clear_cache()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[FakePipeline]:
    pipe = FakePipeline()
    _clear_module_kernels(request.module)

    def build(fn, signature, constexprs, attrs, options):
        pipe.frontend_calls.append((fn.__name__, dict(signature), dict(constexprs), dict(attrs), options))
        return _fake_kernel(fn.__name__, signature, constexprs, attrs, options)

    def print_ir(kernel):
        return f"kernel @{kernel.name} sig={kernel.signature} cx={kernel.constexprs} opt={kernel.optimized}"

    def parse_ir(text):
        pipe.parsed.append(text)
        name = text.split("@", 1)[1].split()[0] if "@" in text else "parsed"
        return SimpleNamespace(name=name, signature={}, constexprs={}, attrs={}, optimized=False,
                               from_text=text, arg_names=[], args=[], arg_attrs=[])

    def optimize(kernel):
        kernel.optimized = True
        return kernel

    def written(kernel):
        return {n for n, t in getattr(kernel, "signature", {}).items() if t.startswith("*") and "out" in n}

    monkeypatch.setattr(compiler, "_frontend_build", build)
    monkeypatch.setattr(compiler, "_print_ir", print_ir)
    monkeypatch.setattr(compiler, "_parse_ir", parse_ir)
    monkeypatch.setattr(compiler, "_optimize", optimize)
    monkeypatch.setattr(compiler, "_written_arguments", written)
    monkeypatch.setitem(backend_registry._INSTANCES, "interpreter", pipe.host)
    monkeypatch.delitem(backend_registry._INSTANCES, "cpu", raising=False)
    monkeypatch.setitem(backend_registry._MISSING, "cpu", "not installed (test)")
    monkeypatch.delitem(backend_registry._INSTANCES, "cuda", raising=False)
    monkeypatch.setitem(backend_registry._MISSING, "cuda", "no GPU here (test)")
    monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("TEGULA_DEBUG", raising=False)
    monkeypatch.delenv("TRITON_DEBUG", raising=False)
    monkeypatch.delenv("TEGULA_CHECKED", raising=False)
    yield pipe
    _clear_module_kernels(request.module)


@pytest.fixture
def cuda_array() -> type:
    """The class of a fake GPU array (`__cuda_array_interface__`, as CuPy arrays have)."""
    return FakeCudaArray


class FakeCudaArray:
    """An object with `__cuda_array_interface__`, as CuPy arrays have."""

    def __init__(self, n: int = 16, typestr: str = "<f4", ptr: int = 0x10000, device: int = 0):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "data": (ptr, False),
                                         "version": 3}
        self.device = SimpleNamespace(id=device)
