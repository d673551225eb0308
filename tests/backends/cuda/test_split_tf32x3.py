"""`input_precision="tf32x3"` dots become three tf32 tensor-core dots (`split_tf32x3`):
float32 accuracy (the dropped small x small product is ~2**-22 of the result) where a
single tf32 dot is off by ~1e-3, checked on the host emulator at sm_80 and sm_90
against float64 with a K that is not a multiple of the block; dots too small for a
tf32 instruction stay exact FMA dots; the PTX has tf32 mma.sync and assembles."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.compiler import to_tgir
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.compiler import ASTSource
from tegula.ir.core import ArgAttrs
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def _matmul(A, B, C, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, P: tl.constexpr):
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + m[:, None] * K + (k0 + k)[None, :], mask=(k0 + k)[None, :] < K, other=0.0)
        b = tl.load(B + (k0 + k)[:, None] * BN + n[None, :], mask=(k0 + k)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=P)
    tl.store(C + m[:, None] * BN + n[None, :], acc)


def _kernel(precision: str, bm: int = 64, bn: int = 64, bk: int = 32):
    sig = {"A": "*fp32", "B": "*fp32", "C": "*fp32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "P": "constexpr"}
    return optimized_ir(ASTSource(_matmul, signature=sig, constexprs={"BM": bm, "BN": bn, "BK": bk, "P": precision},
                                  attrs={"A": 16, "B": 16, "C": 16, "K": ArgAttrs(1, exact_divisibility=True)}))


def _dots(kernel, cap: int) -> list[str]:
    staged, _plan = to_tgir(kernel, 4, 3, cap, checked=False)
    return [ins.attrs.input_precision for ins in staged.walk() if ins.op is Op.DOT]


@pytest.mark.parametrize("cap", [80, 90])
def test_tf32x3_is_three_tf32_dots(cap):
    assert _dots(_kernel("tf32x3"), cap) == ["tf32", "tf32", "tf32"]
    assert _dots(_kernel("ieee"), cap) == ["ieee"]
    # too small for m16n8k8: one exact dot on the FMAs, not three
    assert _dots(_kernel("tf32x3", bm=8, bn=8, bk=8), cap) == ["tf32x3"]


def test_no_split_without_tensor_cores(monkeypatch):
    monkeypatch.setenv("TEGULA_DOT_TENSOR_CORES", "0")
    assert _dots(_kernel("tf32x3"), 90) == ["tf32x3"]


@pytest.mark.parametrize("cap", [80, 90])
def test_tf32x3_has_float32_accuracy(cap):
    K, BM, BN = 100, 64, 64
    rng = np.random.default_rng(cap)
    a = rng.standard_normal((BM, K)).astype(np.float32)
    b = rng.standard_normal((K, BN)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    errors = {}
    for precision in ("tf32", "tf32x3"):
        c = np.full((BM, BN), np.nan, np.float32)
        EmulatedKernel(_kernel(precision), 4, capability=cap, num_stages=3).run((1, 1, 1), [a, b, c, K])
        errors[precision] = np.abs(c - want).max() / np.abs(want).max()
    assert errors["tf32x3"] < 2e-6
    assert errors["tf32"] > 1e-4  # what tf32x3 recovers


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("cap", [80, 90])
def test_tf32x3_ptx_uses_tf32_mma(cap):
    asm, _md = compile_kernel(_kernel("tf32x3"), {"num_warps": 4, "num_stages": 3}, cap)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in asm["ptx"]
    assert asm.get("cubin")
