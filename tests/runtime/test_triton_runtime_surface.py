"""Triton 3.6 runtime names that programs touch before their first kernel: the
allocator, the runtime errors, the cache-manager API, AMD-only launch options."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.runtime import _allocation
from tegula.runtime.cache_manager import FileCacheManager, get_cache_manager, triton_key
from tegula.runtime.errors import InterpreterCompilationError, InterpreterError


def test_set_allocator_is_a_context_variable():
    calls = []

    class Buf:
        def __init__(self, n):
            self.n = n

        def data_ptr(self):
            return 4096

    def alloc(size, alignment, stream):
        calls.append((size, alignment, stream))
        return Buf(size)

    with pytest.raises(RuntimeError, match="no allocator was set"):
        _allocation.allocate_scratch(64, 128, None)
    tegula.set_allocator(alloc)
    try:
        assert _allocation.allocate_scratch(64, 128, 7).data_ptr() == 4096
        assert _allocation.allocate_scratch(0, 128, 7) is None
        assert calls == [(64, 128, 7)]
    finally:
        tegula.set_allocator(_allocation.NullAllocator())
    with pytest.raises(TypeError):
        tegula.set_allocator(42)


@tegula.jit
def bad_desc_kernel(ptr):
    desc = tl.make_tensor_descriptor(ptr, [128, 128], [128, 1], [1, 2])
    desc.load([0, 0])


def test_interpreter_compile_errors_are_interpreter_errors_with_a_cause(monkeypatch):
    monkeypatch.setenv("TEGULA_INTERPRET", "1")  # the interpreter's error classes
    x = np.zeros((128, 128), np.int32)
    with pytest.raises(InterpreterError) as e:
        bad_desc_kernel[(1,)](x)
    assert isinstance(e.value, tegula.CompilationError) and isinstance(e.value, InterpreterCompilationError)
    assert e.value.__cause__ is not None and "16 bytes" in str(e.value.__cause__)
    assert e.value.__cause__.__traceback__ is None  # no tegula frames in what the user sees
    assert "test_triton_runtime_surface.py" in str(e.value)


def test_file_cache_manager_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("TEGULA_CACHE_DIR", str(tmp_path))
    m = get_cache_manager("abc123")
    assert isinstance(m, FileCacheManager) and m.cache_dir == str(tmp_path / "abc123")
    p = m.put(b"\x00\x01", "k.bin")
    q = m.put("text", "k.json")
    assert m.get_file("k.bin") == p and open(p, "rb").read() == b"\x00\x01"
    m.put_group("k", {"k.bin": p, "k.json": q})
    assert m.get_group("k") == {"k.bin": p, "k.json": q}
    assert m.get_group("missing") is None and m.get_file("missing") is None
    key = triton_key()
    assert key.startswith(tegula.__triton_version__) and key == triton_key()


def test_amd_only_launch_options_are_ignored():
    @tegula.jit
    def inc(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    x = np.zeros(100, np.float32)
    inc[(2,)](x, 100, BLOCK=64, waves_per_eu=2, matrix_instr_nonkdim=16, kpack=2)
    assert (x == 1).all()
    with pytest.raises(tegula.KernelArgumentError, match="waves_per_euu"):
        inc[(2,)](x, 100, BLOCK=64, waves_per_euu=2)


def test_triton_names_under_compat():
    code = (
        "import tegula.compat; tegula.compat.install()\n"
        "import triton\n"
        "from triton.runtime.errors import InterpreterError\n"
        "from triton.runtime._allocation import NullAllocator\n"
        "from triton.runtime.cache import triton_key, FileCacheManager, get_cache_manager\n"
        "triton.set_allocator(NullAllocator())\n"
        "assert triton.__version__ == '3.6.0'\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
