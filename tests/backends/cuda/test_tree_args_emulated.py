"""Tuple, namedtuple and host TensorDescriptor kernel arguments through the CUDA
backend's lowering, run on the host emulator (and compiled ahead of time to PTX):
the flattened leaves reach the kernel in order and the kernel rebuilds its values."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from emulated_backend import EmulatedCudaBackend

import tegula as triton
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.runtime import backend_registry
from tegula.runtime.source import ASTSource
from tegula.tools.tensor_descriptor import TensorDescriptor


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    original = backend_registry._FACTORIES["cpu"]
    backend_registry.register_backend("cpu", EmulatedCudaBackend)
    yield EmulatedCudaBackend
    backend_registry.register_backend("cpu", original)


class View(NamedTuple):
    ptr: object
    n: int
    scale: float


@triton.jit
def _tree_kernel(out, pair, view, BLOCK: tl.constexpr):
    a, (b, k) = pair
    offs = tl.arange(0, BLOCK)
    m = offs < view.n
    x = tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m) * k
    tl.store(out + offs, x * view.scale, mask=m)
    tl.store(view.ptr + offs, x, mask=m)


def test_tuple_and_namedtuple_arguments_on_the_emulator(emulated):
    rng = np.random.default_rng()
    n = 100
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out, seen = np.zeros(n, np.float32), np.zeros(n, np.float32)
    before = emulated.launches
    _tree_kernel[(1,)](out, (a, (b, 3)), View(seen, n, 0.5), BLOCK=128, num_warps=1)
    assert emulated.launches == before + 1
    np.testing.assert_allclose(seen, a + 3 * b, rtol=1e-6)
    np.testing.assert_allclose(out, (a + 3 * b) * 0.5, rtol=1e-6)


@pytest.mark.parametrize("cap", [80, 90])
def test_tuple_signature_compiles_to_ptx(cap):
    src = ASTSource(_tree_kernel, {"out": "*fp32", "pair": ("*fp32", ("*fp32", "i32")),
                                   "view": View("*fp32", "i32", "fp32")}, {"BLOCK": 128})
    ck = triton.compile(src, target=GPUTarget("cuda", cap, 32))
    entry = ck.asm["ptx"][ck.asm["ptx"].index(".entry"):].split(")")[0]
    # out, a, b, k, view.ptr, view.n, view.scale: one parameter per runtime leaf
    assert entry.count(".param") == 7
    assert ck.metadata.param_names == ["out", "pair.0", "pair.1.0", "pair.1.1", "view.0", "view.1", "view.2",
                                       "BLOCK"]


@triton.jit
def _desc_kernel(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    x = in_desc.load([pm * BM, pn * BN])
    out_desc.store([pm * BM, pn * BN], x * 2 + 1)


def test_host_descriptor_on_the_emulator(emulated):
    rng = np.random.default_rng()
    m, n, padded = 37, 45, 48  # not multiples of the block: loads pad, stores clip
    x = rng.standard_normal((m, padded)).astype(np.float32)[:, :n]
    y = np.full((m, padded), -7.0, np.float32)
    bm, bn = 16, 16
    _desc_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
        TensorDescriptor.from_tensor(x, [bm, bn]), TensorDescriptor(y, [m, n], [padded, 1], [bm, bn]), bm, bn,
        num_warps=2)
    np.testing.assert_allclose(y[:, :n], x * 2 + 1, rtol=1e-6)
    assert (y[:, n:] == -7.0).all(), "a store clips at the descriptor's shape"


def test_descriptor_signature_compiles_to_ptx():
    src = ASTSource(_desc_kernel, {"in_desc": "tensordesc<fp16[64, 64]>", "out_desc": "tensordesc<fp16[64, 64]>"},
                    {"BM": 64, "BN": 64})
    ck = triton.compile(src, target=GPUTarget("cuda", 90, 32))
    assert ck.metadata.param_names[:6] == ["in_desc.0", "in_desc.1", "in_desc.2", "in_desc.3", "in_desc.4",
                                           "out_desc.0"]
    assert "ld.global" in ck.asm["ptx"] and "st.global" in ck.asm["ptx"]
