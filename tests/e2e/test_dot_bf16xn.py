"""`tl.dot(..., input_precision="bf16x3" | "bf16x6")` on f32 operands (Triton 3.6's
NVIDIA precisions, used e.g. by flash-linear-attention's KDA kernels): the operands are
split into 2 or 3 bf16 pieces and the product is the sum of the bf16 dots of the pieces
Triton's F32DotTC pass keeps, on every backend. Checked against that decomposition
done in numpy, against the exact product (bf16x6 is near f32 accuracy, bf16x3 is
visibly less), and for an infinite operand (NaNs of the small products are dropped)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tegula
import tegula.language as tl


@tegula.jit
def dot_kernel(a_ptr, b_ptr, acc_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               PRECISION: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    acc = tl.load(acc_ptr + m[:, None] * N + n[None, :])
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, acc, input_precision=PRECISION))


def _pieces(x: np.ndarray, count: int) -> list[np.ndarray]:
    out = []
    for i in range(count):
        p = x.astype(ml_dtypes.bfloat16)
        if i != count - 1:
            x = (x - p.astype(np.float32)).astype(np.float32)
        out.append(p.astype(np.float64))
    return out


def _model(a, b, acc, precision):
    """The products Triton keeps, summed exactly (the backends round in between)."""
    count = {"bf16x3": 2, "bf16x6": 3}[precision]
    pa, pb = _pieces(a, count), _pieces(b, count)
    terms = [(0, 0), (1, 0), (0, 1)] + ([(1, 1), (2, 0), (0, 2)] if count == 3 else [])
    return sum(pa[i] @ pb[j] for i, j in terms) + acc


@pytest.mark.parametrize("precision", ["bf16x3", "bf16x6"])
def test_bf16xn_dot_matches_the_decomposition(on, precision):
    rng = np.random.default_rng(7)
    M, N, K = 16, 16, 32
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    acc = rng.standard_normal((M, N)).astype(np.float32)
    out = np.zeros((M, N), np.float32)
    o = on(out)
    dot_kernel[(1,)](on(a), on(b), on(acc), o, M, N, K, precision)
    got = on.back(o).astype(np.float64)
    exact = a.astype(np.float64) @ b.astype(np.float64) + acc
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + np.abs(acc)
    # f32 rounding of the sums only
    np.testing.assert_array_less(np.abs(got - _model(a, b, acc, precision)), 1e-5 * scale)
    err = np.max(np.abs(got - exact) / scale)
    if precision == "bf16x6":
        assert err < 1e-6
    else:
        # the dropped mid*mid and lo terms (about 2**-16 relative) show: not an ieee dot
        assert 1e-7 < err < 1e-4


@pytest.mark.parametrize("precision", ["bf16x3", "bf16x6"])
def test_bf16xn_dot_keeps_infinities(on, precision):
    M = N = K = 16
    a = np.ones((M, K), np.float32)
    a[0, 0] = np.inf
    a[1, 3] = -np.inf
    b = np.full((K, N), 0.5, np.float32)
    acc = np.zeros((M, N), np.float32)
    out = np.zeros((M, N), np.float32)
    o = on(out)
    dot_kernel[(1,)](on(a), on(b), on(acc), o, M, N, K, precision)
    got = on.back(o)
    assert np.all(got[0] == np.inf) and np.all(got[1] == -np.inf)
    assert np.all(got[2:] == 8.0)


def test_unknown_precision_names_the_choices():
    a = np.zeros((16, 16), np.float32)
    with pytest.raises(tegula.CompilationError, match="bf16x3.*Got bf16x9"):
        dot_kernel[(1,)](a, a, a, a.copy(), 16, 16, 16, "bf16x9")


@tegula.jit
def default_dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                       ALLOW_TF32: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, allow_tf32=ALLOW_TF32))


def test_triton_f32_default_sets_the_precision_of_dots_that_name_none(on, monkeypatch):
    """TRITON_F32_DEFAULT (Triton 3.6's knobs.language.fp32_default; flash-linear-attention
    sets it to "ieee" on pre-Ampere GPUs) picks the precision of f32 dots without
    input_precision, even over allow_tf32; a change between launches recompiles."""
    rng = np.random.default_rng(3)
    M = N = K = 16
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    acc = np.zeros((M, N), np.float32)

    def run(allow_tf32):
        o = on(np.zeros((M, N), np.float32))
        default_dot_kernel[(1,)](on(a), on(b), o, M, N, K, allow_tf32)
        return on.back(o)

    def explicit(precision):
        o = on(np.zeros((M, N), np.float32))
        dot_kernel[(1,)](on(a), on(b), on(acc), o, M, N, K, precision)
        return on.back(o)

    monkeypatch.delenv("TEGULA_F32_DEFAULT", raising=False)
    monkeypatch.delenv("TRITON_F32_DEFAULT", raising=False)
    tf32 = run(None)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.max(np.abs(tf32 - exact)) > 1e-4  # tf32 by default
    monkeypatch.setenv("TRITON_F32_DEFAULT", "ieee")
    assert tegula.knobs.language.fp32_default == "ieee"
    np.testing.assert_allclose(run(None), exact, rtol=0, atol=1e-5)
    monkeypatch.setenv("TRITON_F32_DEFAULT", "bf16x3")
    np.testing.assert_array_equal(run(True), explicit("bf16x3"))
    monkeypatch.setenv("TRITON_F32_DEFAULT", "tf32")
    np.testing.assert_array_equal(run(False), tf32)
    monkeypatch.setenv("TRITON_F32_DEFAULT", "fp64")
    with pytest.raises(tegula.CompilationError, match="input_precision must be one of .*Got fp64"):
        run(None)


def test_triton_f32_default_is_part_of_the_disk_cache_key(monkeypatch):
    from tegula.runtime.cache import compile_key

    def key():
        return compile_key("fn", {"a": "*fp32"}, {}, {}, "opts", "target")[0]
    monkeypatch.delenv("TEGULA_F32_DEFAULT", raising=False)
    monkeypatch.delenv("TRITON_F32_DEFAULT", raising=False)
    plain = key()
    monkeypatch.setenv("TRITON_F32_DEFAULT", "ieee")
    assert key() != plain
