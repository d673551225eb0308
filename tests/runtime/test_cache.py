"""Caching: one compile per specialization in memory, the device decides the backend,
and the on-disk cache (content-addressed, atomic, shared by processes)."""
from __future__ import annotations

import json
import multiprocessing
import os

import numpy as np
import pytest

import tegula.language as tl
from tegula.errors import KernelArgumentError
from tegula.runtime import backend_registry
from tegula.runtime.backend_registry import BackendUnavailableError
from tegula.runtime.cache import FileCache, compile_key, stable_repr
from tegula.runtime.jit import jit
from tegula.runtime.options import CompileOptions


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


def _arrays(n=64, dtype=np.float32):
    return np.ones(n, dtype), np.ones(n, dtype), np.zeros(n, dtype)


# ---------------------------------------------------------------------------- in memory

def test_one_compile_per_specialization(fake):
    x, y, out = _arrays()
    for _ in range(5):
        add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    add_kernel[(2,)](x, y, out, 128, BLOCK=32)    # same specialization: 128 % 16 == 0
    assert len(fake.frontend_calls) == 1
    assert len(fake.host.loads) == 1
    assert len(fake.launches) == 6


@pytest.mark.parametrize("change", [
    dict(n=65), dict(n=1), dict(BLOCK=64), dict(dtype=np.float16), dict(num_warps=8), dict(num_stages=2),
    dict(debug=True), dict(offset=1),
])
def test_new_compile_when_the_specialization_changes(fake, change):
    x, y, out = _arrays()
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    change = dict(change)
    n = change.pop("n", 64)
    block = change.pop("BLOCK", 32)
    dtype = change.pop("dtype", np.float32)
    offset = change.pop("offset", 0)
    x2, y2, out2 = _arrays(80, dtype)
    add_kernel[(1,)](x2[offset:], y2, out2, n, BLOCK=block, **change)
    add_kernel[(1,)](x2[offset:], y2, out2, n, BLOCK=block, **change)
    assert len(fake.frontend_calls) == 2


def test_knobs_are_part_of_the_key(fake, monkeypatch):
    x, y, out = _arrays()
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    monkeypatch.setenv("TEGULA_DEBUG", "1")
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    assert [c[4].debug for c in fake.frontend_calls] == [False, True]
    monkeypatch.delenv("TEGULA_DEBUG")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    assert len(fake.frontend_calls) == 3


def test_concurrent_launches_compile_once(fake):
    from concurrent.futures import ThreadPoolExecutor

    x, y, out = _arrays()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: add_kernel.warmup(x, y, out, 64, grid=(1,), BLOCK=32), range(32)))
    assert len(fake.frontend_calls) == 1


# ---------------------------------------------------------------------------- devices

def test_gpu_arrays_without_a_cuda_backend(fake, cuda_array):
    x = cuda_array()
    with pytest.raises(BackendUnavailableError, match=r"no CUDA backend/GPU available: argument 'x_ptr'"):
        add_kernel[(1,)](x, x, x, 16, BLOCK=16)


def test_gpu_arrays_go_to_the_cuda_backend(fake, monkeypatch, cuda_array):
    cuda = fake.enable_cuda(monkeypatch)
    x = cuda_array(device=1)
    compiled = add_kernel[(1,)](x, x, x, 16, BLOCK=16)
    assert compiled.metadata.target.backend == "cuda" and compiled.metadata.target.arch == 90
    assert cuda.loads[0][1] == 1 and len(cuda.launches) == 1 and fake.launches == []
    # and host arrays still run on the host, as a separate specialization
    a, b, c = _arrays()
    assert add_kernel[(1,)](a, b, c, 16, BLOCK=16).metadata.target.backend == "interpreter"


def test_mixing_host_and_gpu_arrays_is_an_error(fake, monkeypatch, cuda_array):
    fake.enable_cuda(monkeypatch)
    x, y, out = _arrays()
    with pytest.raises(KernelArgumentError, match=r"different devices \('x_ptr' on cpu, 'y_ptr' on cuda:0\)"):
        add_kernel[(1,)](x, cuda_array(), out, 16, BLOCK=16)


def test_interpret_knob_forces_the_interpreter(fake, monkeypatch, cuda_array):
    fake.enable_cuda(monkeypatch)
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    x = cuda_array()
    compiled = add_kernel[(1,)](x, x, x, 16, BLOCK=16)
    assert compiled.metadata.target.backend == "interpreter" and len(fake.launches) == 1


def test_kernels_without_arrays_run_on_the_host(fake):
    @jit
    def scalars(a, b):
        pass

    assert scalars[(1,)](3, 2.0).metadata.target.backend == "interpreter"


def test_unknown_backend_is_reported():
    with pytest.raises(BackendUnavailableError, match="no backend named 'nope'"):
        backend_registry.get_backend("nope")


# ---------------------------------------------------------------------------- on disk

def test_file_cache_roundtrip(tmp_path):
    cache = FileCache("ab" + "0" * 62, str(tmp_path))
    assert cache.get_group("k") is None
    cache.put_group("k", {"k.ptx": "text", "k.cubin": b"\x00\x01", "k.json": "{}"})
    assert cache.get_group("k") == {"k.ptx": "text", "k.cubin": b"\x00\x01", "k.json": "{}"}
    assert not [f for f in os.listdir(cache.dir) if f.startswith(".tmp")]   # no temp files left
    os.remove(os.path.join(cache.dir, "k.ptx"))
    assert cache.get_group("k") is None    # incomplete group = miss


def _writer(args):
    root, i = args
    cache = FileCache("cd" + "1" * 62, root)
    for _ in range(20):
        cache.put_group("k", {"k.bin": bytes(range(256)) * 64, "k.txt": "x" * 5000})
        got = cache.get_group("k")
        assert got is None or (got["k.bin"] == bytes(range(256)) * 64 and got["k.txt"] == "x" * 5000)
    return i


def test_file_cache_concurrent_processes(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        assert sorted(pool.map(_writer, [(str(tmp_path), i) for i in range(4)])) == [0, 1, 2, 3]
    got = FileCache("cd" + "1" * 62, str(tmp_path)).get_group("k")
    assert got["k.txt"] == "x" * 5000


def test_compile_key_is_sensitive_to_every_input():
    from tegula.backends.compiler import GPUTarget

    base = dict(fn_key="abc", signature={"x": "*fp32", "n": "i32"}, constexprs={"B": 64},
                attrs={"x": 16}, options=CompileOptions(), target=GPUTarget("cuda", 90, 32))
    key, storable = compile_key(**base)
    assert storable and key == compile_key(**base)[0]
    changes = [dict(fn_key="abd"), dict(signature={"x": "*fp16", "n": "i32"}), dict(constexprs={"B": 128}),
               dict(constexprs={"B": 64.0}), dict(attrs={"x": 1}), dict(options=CompileOptions(num_warps=8)),
               dict(target=GPUTarget("cuda", 80, 32))]
    for change in changes:
        assert compile_key(**{**base, **change})[0] != key, change


@pytest.mark.parametrize("knob", ["wgmma", "wgmma_register_b", "mma_register_operands", "tma", "dot_tensor_cores",
                                  "pipeline_lagged", "register_offsets", "alignment_versions"])
def test_compile_key_follows_code_changing_knobs(knob, monkeypatch):
    from tegula.backends.compiler import GPUTarget
    from tegula.config import knobs

    args = dict(fn_key="abc", signature={"x": "*fp32"}, constexprs={}, attrs={}, options=CompileOptions(),
                target=GPUTarget("cuda", 90, 32))
    before = compile_key(**args)[0]
    monkeypatch.setattr(knobs, knob, not getattr(knobs, knob))
    assert compile_key(**args)[0] != before


def test_compile_key_follows_the_compilers_own_source(tmp_path, monkeypatch):
    """A changed compiler (same version string) must not reuse old binaries."""
    import tegula.runtime.cache as C
    from tegula.backends.compiler import GPUTarget

    args = dict(fn_key="abc", signature={"x": "*fp32"}, constexprs={}, attrs={}, options=CompileOptions(),
                target=GPUTarget("cuda", 90, 32))
    before = compile_key(**args)[0]
    assert len(C.compiler_source_hash()) == 64 and C.compiler_source_hash() in C.versions()
    monkeypatch.setattr(C, "compiler_source_hash", lambda: "0" * 64)
    C.versions.cache_clear()
    try:
        assert compile_key(**args)[0] != before
    finally:
        monkeypatch.undo()
        C.versions.cache_clear()
    assert compile_key(**args)[0] == before


def test_process_local_constexprs_are_not_stored():
    assert stable_repr(object())[1] is False
    assert stable_repr((1, "a", 2.5))[1] is True


def _disk_backend(fake, monkeypatch):
    fake.host.disk_cacheable = True
    fake.host.binary_stage = "bin"
    return fake.host


def test_disk_cache_skips_the_frontend(fake, monkeypatch):
    _disk_backend(fake, monkeypatch)
    x, y, out = _arrays()
    first = add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    add_kernel.clear_cache()                                # a new process, as far as memory goes
    second = add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    assert len(fake.frontend_calls) == 1
    assert second.hash == first.hash and second.asm == first.asm
    assert second.kernel == b"\x00binary"
    assert second.metadata.written_args == first.metadata.written_args == ("out_ptr",)
    assert second.metadata.target == first.metadata.target
    assert len(fake.launches) == 2


def test_disk_cache_entry_layout(fake, monkeypatch):
    _disk_backend(fake, monkeypatch)
    x, y, out = _arrays()
    c = add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    d = os.path.join(os.environ["TEGULA_CACHE_DIR"], c.hash[:2], c.hash)
    files = sorted(os.listdir(d))
    assert files == sorted(["__grp__add_kernel.json", "add_kernel.fakeasm", "add_kernel.bin",
                            "add_kernel.json", "add_kernel.tir", "add_kernel.tir_opt"])
    meta = json.load(open(os.path.join(d, "add_kernel.json")))
    assert meta["num_warps"] == 4 and meta["target"]["backend"] == "interpreter"


@pytest.mark.parametrize("env", ["TEGULA_ALWAYS_COMPILE", "TEGULA_DUMP_DIR"])
def test_disk_cache_bypassed(fake, monkeypatch, tmp_path, env):
    _disk_backend(fake, monkeypatch)
    monkeypatch.setenv(env, "1" if env == "TEGULA_ALWAYS_COMPILE" else str(tmp_path))
    x, y, out = _arrays()
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    add_kernel.clear_cache()
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    assert len(fake.frontend_calls) == 2


def test_interpreter_results_are_not_stored(fake):
    x, y, out = _arrays()
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    assert not os.listdir(os.environ["TEGULA_CACHE_DIR"])
