"""Tuple, namedtuple and host TensorDescriptor kernel arguments on the interpreter:
specialization per leaf, the kernel's view of them, their cache keys, and the errors
for leaves no kernel can take (Triton 3.6 semantics)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.errors import KernelArgumentError
from tegula.tools.tensor_descriptor import TensorDescriptor


class Pair(NamedTuple):
    ptr: object
    stride: tuple


@triton.jit
def _scale_rows(out, src, dims, factors, BLOCK: tl.constexpr):
    tl.static_assert(src.stride[1] == 1)  # an int 1 in a tuple is specialized to a constexpr
    rows, cols = dims
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(src.ptr + r * src.stride[0] + offs, mask=offs < cols)
    for i in tl.static_range(len(factors)):
        x = x * factors[i]
    tl.store(out + r * cols + offs, x, mask=offs < cols)


def test_namedtuple_nested_tuple_and_constexpr_leaves():
    rng = np.random.default_rng()
    x = rng.standard_normal((5, 40)).astype(np.float32)
    out = np.zeros((5, 30), np.float32)
    _scale_rows[(5,)](out, Pair(x, (40, 1)), (5, 30), (2.0, tl.constexpr(3), 0.5), BLOCK=32)
    np.testing.assert_allclose(out, x[:, :30] * 3.0, rtol=1e-6)
    # a different tuple length is a different specialization
    _scale_rows[(5,)](out, Pair(x, (40, 1)), (5, 30), (2.0,), BLOCK=32)
    np.testing.assert_allclose(out, x[:, :30] * 2.0, rtol=1e-6)
    assert len(_scale_rows.kernel_cache) == 2


@triton.jit
def _sum_tuple(out, values):
    acc = 0
    for i in tl.static_range(len(values)):
        acc += tl.load(values[i])
    tl.store(out, acc)


@pytest.mark.parametrize("n", [1, 3])
def test_tuple_of_pointers_passed_on(n):
    rng = np.random.default_rng()
    xs = tuple(rng.standard_normal(1).astype(np.float32) for _ in range(n))
    out = np.zeros(1, np.float32)
    _sum_tuple[(1,)](out, xs)
    np.testing.assert_allclose(out, sum(x for x in xs), rtol=1e-6)


def test_unsupported_leaf_is_named_with_its_path():
    out = np.zeros(1, np.float32)
    with pytest.raises(KernelArgumentError, match=r"argument 'values' .* its element \[1\]\[0\] is a str"):
        _sum_tuple[(1,)](out, (out, ("a",)))


@triton.jit
def _copy_desc(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]))


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_host_descriptor_pads_loads_and_clips_stores(padding):
    torch = pytest.importorskip("torch")
    m, n = 19, 27
    x = torch.randn(m, 28)[:, :n]
    full = torch.full((32, 32), -1.0)
    bm, bn = 16, 16
    src = TensorDescriptor.from_tensor(x, [bm, bn], padding=padding)
    dst = TensorDescriptor(full, [32, 32], [32, 1], [bm, bn])
    _copy_desc[(2, 2)](src, dst, bm, bn)
    torch.testing.assert_close(full[:m, :n], x)
    pad = full[m:, :].flatten().tolist() + full[:, n:].flatten().tolist()
    assert all((v != v) if padding == "nan" else v == 0 for v in pad)


def test_host_descriptor_checks_are_triton_s():
    torch = pytest.importorskip("torch")
    x = torch.zeros(8, 8)
    with pytest.raises(AssertionError, match="Last dimension must be contiguous"):
        TensorDescriptor(x, [8, 8], [8, 2], [8, 8])
    with pytest.raises(AssertionError, match="strides must be 16-byte aligned"):
        TensorDescriptor(x, [8, 3], [3, 1], [8, 4])
    with pytest.raises(ValueError, match="must be a power of 2"):
        TensorDescriptor(x, [8, 8], [8, 1], [8, 6])
    with pytest.raises(AssertionError, match="not supported for integer"):
        TensorDescriptor.from_tensor(torch.zeros(8, 8, dtype=torch.int32), [8, 8], padding="nan")


def test_tools_module_under_compat(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "uses_triton_tools.py"
    script.write_text("import triton.tools.tensor_descriptor as m, tegula.tools.tensor_descriptor as t\n"
                      "assert m.TensorDescriptor is t.TensorDescriptor\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(triton.__file__))))
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.abspath(triton.__file__)) + "/.."}
    r = subprocess.run([sys.executable, "-m", "tegula.compat", str(script)], capture_output=True, text=True,
                       env=env, cwd=root)
    assert r.returncode == 0, r.stderr


@triton.jit
def _pair_store(out, pair):
    tl.store(out, pair[0] * pair[1])


def test_ast_source_takes_triton_paths_and_dotted_leaves():
    from tegula.runtime.source import ASTSource

    by_path = ASTSource(_pair_store, {"out": "*fp32", "pair": ("fp32", "constexpr")}, {(1, 1): 3})
    by_name = ASTSource(_pair_store, {"out": "*fp32", "pair": ("fp32", "constexpr")}, {"pair.1": 3})
    assert by_path.param_names == by_name.param_names == ["out", "pair.0", "pair.1"]
    assert by_path.constexprs == by_name.constexprs == {"pair.1": 3}
    assert by_path.signature == {"out": "*fp32", "pair.0": "fp32", "pair.1": "constexpr"}
    ck = triton.compile(by_path, target=triton.backends.compiler.GPUTarget("cuda", 80, 32))
    assert ck.metadata.arg_names == ["out", "pair.0"]
    with pytest.raises(KernelArgumentError, match=r"lacks the type of: pair.1"):
        ASTSource(_pair_store, {"out": "*fp32", "pair": ("fp32", "constexpr")})


def test_compiled_kernel_run_takes_the_tuple():
    out = np.zeros(1, np.float32)
    ck = _pair_store[(1,)](out, (2.0, 4))
    ck.run((1,), out, (3.0, 4))
    assert out[0] == 12.0
