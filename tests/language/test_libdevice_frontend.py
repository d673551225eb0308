"""libdevice through the language: import paths, Triton's dtype dispatch (exact match,
else promotion, else a clear error), boolean results, user `@extern` wrappers."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.language import core
from tegula.language.extra import libdevice


@tegula.jit
def pow_kernel(x_ptr, e_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    e = tl.load(e_ptr + offs, mask=m)
    tl.store(out_ptr + offs, libdevice.pow(x, e), mask=m)


def test_dispatch_by_argument_dtypes():
    x = np.random.rand(100).astype(np.float32) + 0.5
    e = np.random.randint(-3, 4, 100).astype(np.int32)
    out = np.empty_like(x)
    k = pow_kernel[(1,)](x, e, out, 100, BLOCK=128)
    assert "__nv_powif" in k.asm["tir"]
    np.testing.assert_allclose(out, x.astype(np.float64) ** e, rtol=1e-6)
    # fp32 ** fp64 is not an overload: promoted to fp64 (Triton's rule), __nv_pow
    e64 = np.random.rand(100)
    out64 = np.empty(100, np.float64)
    k = pow_kernel[(1,)](x, e64, out64, 100, BLOCK=128)
    assert "symbol = '__nv_pow'" in k.asm["tir"]
    np.testing.assert_allclose(out64, x.astype(np.float64) ** e64, rtol=1e-12)


@tegula.jit
def tanh_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.extra.cuda.libdevice.tanh(tl.load(x_ptr + offs)))


def test_unsupported_dtype_is_a_located_error():
    x = np.random.rand(16).astype(np.float16)
    with pytest.raises(tegula.CompilationError) as e:
        tanh_kernel[(1,)](x, np.empty_like(x), BLOCK=16)
    assert "input arg type does not match" in str(e.value) and "fp16" in str(e.value)
    assert "test_libdevice_frontend.py" in str(e.value)


@tegula.jit
def classify_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    bad = libdevice.isnan(x) | libdevice.isinf(x)
    tl.store(out_ptr + offs, tl.where(bad, 0.0, x))


def test_boolean_results():
    x = np.array([1.0, np.nan, np.inf, -2.0] * 4, np.float32)
    out = np.empty_like(x)
    classify_kernel[(1,)](x, out, BLOCK=16)
    np.testing.assert_array_equal(out, np.where(np.isfinite(x), x, 0.0))


@core.extern
def my_expm1(arg0, _semantic=None):
    return core.extern_elementwise("", "", [arg0], {(tl.float32,): ("__nv_expm1f", tl.float32),
                                                    (tl.float64,): ("__nv_expm1", tl.float64)},
                                   is_pure=True, _semantic=_semantic)


@tegula.jit
def user_extern_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, my_expm1(tl.load(x_ptr + offs)))


def test_user_extern_wrapper():
    x = (np.random.rand(32) * 1e-3).astype(np.float64)
    out = np.empty_like(x)
    user_extern_kernel[(1,)](x, out, BLOCK=32)
    np.testing.assert_allclose(out, np.expm1(x), rtol=1e-15)


def test_wrong_argument_count():
    @tegula.jit
    def bad(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, libdevice.atan2(tl.load(x_ptr + offs)))

    with pytest.raises(tegula.CompilationError, match=r"atan2\(\) takes 2 arguments"):
        bad[(1,)](np.zeros(8, np.float32), BLOCK=8)


def test_triton_import_paths_under_compat():
    code = (
        "import tegula.compat; tegula.compat.install()\n"
        "from triton.language.extra import libdevice as a\n"
        "from triton.language.extra.cuda import libdevice as b\n"
        "import triton.language.extra.cuda.libdevice as c\n"
        "import triton.language as tl\n"
        "assert a is b is c is tl.extra.cuda.libdevice is tl.extra.libdevice\n"
        "assert len([n for n in dir(a) if not n.startswith('_')]) >= 197\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
