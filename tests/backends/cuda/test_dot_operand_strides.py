"""A dot outside any loop whose operands are column-major (their unit stride is the M
or N one, specialized to the constant 1), on the host emulator at sm_80 and sm_90.

On sm_90 a 16-bit A is loaded straight into wgmma's register-A layout, whose
consecutive registers run along K. The load was vectorized along those registers
although memory is contiguous along M, so each vector read elements a column apart:
wrong results on the emulator, "misaligned address" on the H200 (Triton's
test_dot[...-True-...] cases, col_a). The lowering now vectorizes only along the
dimension the access analysis found contiguous (`LayoutPlan.vec_dim`)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def _one_dot(X, stride_xm, stride_xk, Y, stride_yk, stride_yn, Z, stride_zm,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    x = tl.load(X + m[:, None] * stride_xm + k[None, :] * stride_xk)
    y = tl.load(Y + k[:, None] * stride_yk + n[None, :] * stride_yn)
    tl.store(Z + m[:, None] * stride_zm + n[None, :], tl.dot(x, y))


_TYPES = {"fp16": (np.float16, np.float32, "fp32"), "i8": (np.int8, np.int32, "i32")}


@pytest.mark.parametrize("cap", [80, 90])
@pytest.mark.parametrize("num_warps", [4, 8])
@pytest.mark.parametrize("dtype", ["fp16", "i8"])
@pytest.mark.parametrize("col_a,col_b", [(True, False), (False, True), (True, True)])
def test_column_major_operands(col_a, col_b, dtype, num_warps, cap):
    BM, BN, BK = 64 * (num_warps // 4), 64, 32
    src, acc, acc_name = _TYPES[dtype]
    rng = np.random.default_rng(7)
    x = rng.integers(-4, 5, size=(BM, BK)).astype(src) if dtype == "i8" else rng.standard_normal((BM, BK)).astype(src)
    y = rng.integers(-4, 5, size=(BK, BN)).astype(src) if dtype == "i8" else rng.standard_normal((BK, BN)).astype(src)
    # strides in elements; the unit one is a constexpr 1, as the launcher specializes it
    sx, sy = ((1, BM) if col_a else (BK, 1)), ((1, BK) if col_b else (BN, 1))
    sig = {"X": f"*{dtype}", "Y": f"*{dtype}", "Z": f"*{acc_name}", "stride_zm": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    cx = {"BM": BM, "BN": BN, "BK": BK}
    values = {}
    for name, stride in zip(("stride_xm", "stride_xk", "stride_yk", "stride_yn"), sx + sy):
        if stride == 1:
            sig[name], cx[name] = "constexpr", 1
        else:
            sig[name], values[name] = "i32", stride
    attrs = {n: 16 for n in sig if sig[n] != "constexpr"}
    kernel = optimized_ir(ASTSource(_one_dot, signature=sig, constexprs=cx, attrs=attrs))
    z = np.zeros((BM, BN), acc)
    data = {"X": (x.T if col_a else x).reshape(-1).copy(), "Y": (y.T if col_b else y).reshape(-1).copy(),
            "Z": z.reshape(-1), "stride_zm": BN, **values}
    args = [data[name] for name in kernel.arg_names]
    EmulatedKernel(kernel, num_warps, capability=cap).run((1, 1, 1), args)
    want = x.astype(np.float64) @ y.astype(np.float64)
    np.testing.assert_allclose(z, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("col_a,col_b", [(False, True), (True, False), (True, True)])
def test_column_major_operands_are_staged_in_vectors(col_a, col_b):
    """A 16-bit operand whose registers run along M or N rather than K (column-major A,
    row-major B: `ldmatrix.trans` reads the fragments) or along K for B (column-major,
    or `tl.trans` of a row-major load: attention's `dot(q, tl.trans(k))` outside a
    pipelined loop, fla's `dot(b_k, tl.trans(b_k))`: `ldmatrix` without `.trans`) is
    written to the dot's scratch in the orientation its registers run, in 16-byte
    vectors (it took one 16-bit store an element)."""
    from tegula.backends.cuda import compile_kernel

    BM, BN, BK = 64, 64, 32
    sig = {"X": "*fp16", "Y": "*fp16", "Z": "*fp32", "stride_zm": "i32", "BM": "constexpr", "BN": "constexpr",
           "BK": "constexpr"}
    cx = {"BM": BM, "BN": BN, "BK": BK}
    for name, unit in (("stride_xm", col_a), ("stride_xk", not col_a), ("stride_yk", col_b),
                       ("stride_yn", not col_b)):
        if unit:
            sig[name], cx[name] = "constexpr", 1
        else:
            sig[name] = "i32"
    attrs = {n: 16 for n in sig if sig[n] != "constexpr"}
    kernel = optimized_ir(ASTSource(_one_dot, signature=sig, constexprs=cx, attrs=attrs))
    ptx = compile_kernel(kernel, {"num_warps": 4, "num_stages": 1}, 80)[0]["ptx"]
    assert "st.shared.b16" not in ptx and "st.shared.v4.b32" in ptx
    # .trans for a column-major A and a row-major B, not for the other two
    assert ("ldmatrix.sync.aligned.m8n8.x4.trans" in ptx) == (col_a or not col_b)
