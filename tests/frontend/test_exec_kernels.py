"""Kernels defined by `exec` of edited source text (as Triton's tests build variants)
compile and run; their errors still point at the kernel's line."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tegula
import tegula.language as tl

TEMPLATE = textwrap.dedent('''
    @tegula.jit
    def kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(y_ptr + offs, GENERATE_TEST_HERE)
''')


def build(expr: str):
    ns: dict = {}
    exec(TEMPLATE.replace("GENERATE_TEST_HERE", expr), {"tegula": tegula, "tl": tl}, ns)
    return ns["kernel"]


def test_exec_built_variants_compile_and_run():
    x = np.random.rand(64).astype(np.float32)
    for expr, ref in (("x * 2", x * 2), ("x + 1", x + 1), ("tl.exp(x)", np.exp(x))):
        y = np.empty_like(x)
        build(expr)[(1,)](x, y, BLOCK=64)
        np.testing.assert_allclose(y, ref, rtol=1e-6)


def test_exec_built_kernel_errors_show_the_source_line():
    y = np.empty(64, np.float32)
    with pytest.raises(tegula.CompilationError) as e:
        build("x + undefined_name")[(1,)](np.zeros(64, np.float32), y, BLOCK=64)
    text = str(e.value)
    assert "undefined_name" in text and "<exec kernel" in text
    assert "tl.store(y_ptr + offs, x + undefined_name)" in text  # the line, from linecache


def test_function_without_any_source_is_a_clear_error():
    code = compile("def k(x):\n    return x\n", "<nowhere>", "exec")  # not mentioning jit: not kept
    ns: dict = {}
    exec(code, ns)
    with pytest.raises(tegula.TegulaError, match="cannot read the source"):
        tegula.jit(ns["k"])[(1,)](np.zeros(4, np.float32))


@tegula.jit
def template_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # noqa: F841  (used by the edited text)
    tl.store(y_ptr + offs, GENERATE_TEST_HERE)  # noqa: F821  (replaced before compiling)


def test_unsafe_update_src_and_device_caches():
    # Triton's patch_kernel outside the interpreter: a fresh JITFunction over the same
    # function, its source text edited
    k = tegula.JITFunction(template_kernel.fn)
    k._unsafe_update_src(k.src.replace("GENERATE_TEST_HERE", "x * 3 + 1"))
    x = np.random.rand(32).astype(np.float32)
    y = np.empty_like(x)
    k[(1,)](x, y, BLOCK=32)
    np.testing.assert_allclose(y, x * 3 + 1, rtol=1e-6)
    k[(1,)](x, y, BLOCK=32)
    k[(1,)](x[:16], y[:16], BLOCK=16)
    caches = k.device_caches
    assert sum(len(v[0]) for v in caches.values()) == 2  # two variants: BLOCK 32 and 16
    k._unsafe_update_src(k.src.replace("x * 3 + 1", "x - 2"))
    assert k.device_caches == {}
    k[(1,)](x, y, BLOCK=32)
    np.testing.assert_allclose(y, x - 2, rtol=1e-6)
