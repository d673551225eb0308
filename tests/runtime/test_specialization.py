"""Triton 3.6's specialization rules: signature strings, `== 1`, divisibility by 16,
`do_not_specialize`, and agreement between the launcher's inline cases and
`specialization.spec_value` (which the compiler is given on a cache miss)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula.language as tl
from tegula.errors import KernelArgumentError
from tegula.runtime import binder
from tegula.runtime import specialization as S
from tegula.runtime.args import MockTensor, reinterpret
from tegula.runtime.jit import jit

torch = pytest.importorskip("torch")


@jit
def k1(a):
    pass


@jit(do_not_specialize=["a"])
def k1_dns(a):
    pass


@jit(do_not_specialize_on_alignment=["a"])
def k1_dnsa(a):
    pass


@jit
def k2(a, b):
    pass


def _call(fake, kernel, *args, **kwargs):
    """What the compiler is given for this launch (compiled afresh: cache cleared)."""
    kernel.clear_cache()
    kernel[(1,)](*args, **kwargs)
    _, signature, constexprs, attrs, _ = fake.frontend_calls[-1]
    return signature, constexprs, attrs


@pytest.mark.parametrize("array, sig", [
    (np.zeros(4, np.float32), "*fp32"), (np.zeros(4, np.float16), "*fp16"),
    (np.zeros(4, np.float64), "*fp64"),
    (np.zeros(4, np.int8), "*i8"), (np.zeros(4, np.int16), "*i16"), (np.zeros(4, np.int32), "*i32"),
    (np.zeros(4, np.int64), "*i64"), (np.zeros(4, np.uint8), "*u8"), (np.zeros(4, np.uint32), "*u32"),
    (np.zeros(4, np.bool_), "*i1"),
])
def test_numpy_pointer_signatures(fake, array, sig):
    assert _call(fake, k1, array)[0] == {"a": sig}


@pytest.mark.parametrize("dtype, sig", [
    ("float32", "*fp32"), ("float16", "*fp16"), ("bfloat16", "*bf16"), ("float64", "*fp64"),
    ("int8", "*i8"), ("int16", "*i16"), ("int32", "*i32"), ("int64", "*i64"), ("uint8", "*u8"),
    ("bool", "*i1"), ("float8_e4m3fn", "*fp8e4nv"), ("float8_e5m2", "*fp8e5"),
])
def test_torch_pointer_signatures(fake, dtype, sig):
    t = torch.zeros(4, dtype=getattr(torch, dtype))
    assert _call(fake, k1, t)[0] == {"a": sig}


def test_ml_dtypes_bfloat16(fake):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert _call(fake, k1, np.zeros(4, ml_dtypes.bfloat16))[0] == {"a": "*bf16"}


@pytest.mark.parametrize("value, sig", [
    (True, "i1"), (False, "i1"), (np.bool_(True), "i1"),
    (7, "i32"), (-7, "i32"), (2**31 - 1, "i32"), (-2**31, "i32"), (2**31, "i64"), (-2**31 - 1, "i64"),
    (2**63 - 1, "i64"), (2**63, "u64"), (2**64 - 1, "u64"), (np.int64(5), "i32"),
    (np.int32(2**20 + 3), "i32"),
    (1.5, "fp32"), (np.float64(2.5), "fp32"), (np.float32(2.5), "fp32"), (np.float16(2.5), "fp16"),
])
def test_scalar_signatures(fake, value, sig):
    assert _call(fake, k1, value)[0] == {"a": sig}


def test_none_and_one_become_constexprs(fake):
    sig, cx, attrs = _call(fake, k2, None, 1)
    assert sig == {"a": "constexpr", "b": "constexpr"}
    assert cx == {"a": None, "b": 1} and attrs == {}
    sig, cx, _ = _call(fake, k2, np.int64(1), 1.0)
    assert sig == {"a": "constexpr", "b": "fp32"} and cx == {"a": 1}


def test_integer_divisibility(fake):
    # the largest power of two up to 16 dividing the value (Triton: only 16 or 1)
    for value, div in [(16, 16), (32, 16), (-48, 16), (0, 16), (17, 1), (8, 8), (3000, 8), (6, 2), (-12, 4),
                       (2**40, 16), (2**40 + 8, 8), (2**40 + 1, 1)]:
        _, _, attrs = _call(fake, k1, value)
        assert attrs["a"].divisibility == div, value


def test_pointer_alignment(fake):
    base = np.zeros(64, np.float32)
    assert base.ctypes.data % 16 == 0
    assert _call(fake, k1, base)[2]["a"].divisibility == 16
    assert _call(fake, k1, base[1:])[2]["a"].divisibility == 1      # 4 bytes off
    assert _call(fake, k1, base[4:])[2]["a"].divisibility == 16     # 16 bytes off
    t = torch.zeros(64)
    assert _call(fake, k1, t[1:])[2]["a"].divisibility == 1
    assert _call(fake, k1, t[4:])[2]["a"].divisibility == 16


def test_do_not_specialize(fake):
    sig, cx, attrs = _call(fake, k1_dns, 1)
    assert sig == {"a": "i32"} and cx == {} and attrs["a"].divisibility == 1
    assert _call(fake, k1_dns, 32)[2]["a"].divisibility == 1
    assert _call(fake, k1_dns, np.zeros(4, np.float32))[2]["a"].divisibility == 1


def test_do_not_specialize_on_alignment(fake):
    sig, cx, _ = _call(fake, k1_dnsa, 1)
    assert sig == {"a": "constexpr"} and cx == {"a": 1}    # == 1 still specializes
    assert _call(fake, k1_dnsa, 32)[2]["a"].divisibility == 1
    assert _call(fake, k1_dnsa, torch.zeros(4))[2]["a"].divisibility == 1


def test_annotated_parameter_types(fake, tmp_path, monkeypatch):
    # Triton's pointer annotations ("*fp16") are not Python expressions ruff accepts here.
    (tmp_path / "ann_mod.py").write_text(
        "import tegula\nimport tegula.language as tl\n"
        "@tegula.jit\ndef ann(n: tl.int64, f: 'tl.float32', p: '*fp16'):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from ann_mod import ann

    t = torch.zeros(8, dtype=torch.int16)
    sig, cx, attrs = _call(fake, ann, 1, 2, t)
    assert sig == {"n": "i64", "f": "fp32", "p": "*fp16"} and cx == {}
    assert _call(fake, ann, 32, 2.0, t)[2]["n"].divisibility == 16


def test_constexpr_values_of_equal_python_values_compile_separately(fake):
    @jit
    def ck(x, C: tl.constexpr):
        pass

    x = np.zeros(4, np.float32)
    for value in (1, True, 1.0, "1", tl.constexpr(2), 2):
        ck[(1,)](x, value)
    seen = [c[2]["C"] for c in fake.frontend_calls]
    assert seen == [1, True, 1.0, "1", 2]   # constexpr(2) and 2 share one compile
    assert [type(v) for v in seen] == [int, bool, float, str, int]


def test_unhashable_constexpr_values(fake):
    @jit
    def ck(x, C: tl.constexpr):
        pass

    x = np.zeros(4, np.float32)
    ck[(1,)](x, [1, 2])
    ck[(1,)](x, [1, 2])
    ck[(1,)](x, [1, 3])
    assert [c[2]["C"] for c in fake.frontend_calls] == [[1, 2], [1, 3]]


def test_tensor_wrapper_and_mock_tensor(fake):
    t = torch.zeros(8, dtype=torch.float32)
    assert _call(fake, k1, reinterpret(t, torch.int32))[0] == {"a": "*i32"}
    assert S.spec_value(MockTensor(torch.float16)) == ("*fp16", 16, S.NEUTRAL_DEVICE)


def test_cuda_arrays_are_recognised(fake, monkeypatch, cuda_array):
    arr = cuda_array(typestr="<f2", device=1)
    assert S.spec_value(arr) == ("*fp16", 16, 1)
    assert S.spec_value(cuda_array(ptr=0x10004)) == ("*fp32", 1, 0)


def test_int_expression_matches_spec_int():
    values = [0, 1, -1, 15, 16, 17, 32, -16, -17, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**31 + 16,
              2**63 - 1, 2**63, 2**64 - 16, -2**63, 2**40]
    for specialize in (True, False):
        for align in (True, False):
            expr = binder._int_expr("v", "slow(v)", specialize, align)
            for v in values:
                ns = {"v": v, "slow": lambda x: S.spec_int(x, specialize, align), "_tg_ONE": S.SPEC_ONE,
                      "_tg_I32": S.SPEC_I32, "_tg_I32_DIV": S.SPEC_I32_BY_LOW_BITS}
                assert eval(expr, ns) == S.spec_int(v, specialize, align), (v, specialize, align)


def test_unsupported_dtype_is_reported(fake):
    with pytest.raises(KernelArgumentError, match="unsupported element type"):
        k1[(1,)](np.zeros(4, np.complex64))
