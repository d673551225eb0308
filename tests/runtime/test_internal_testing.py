"""`tegula._internal_testing` (`triton._internal_testing`): the helpers Triton's unit
tests import behave as those tests expect."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tegula.language as tl
from tegula import _internal_testing as it


def test_dtype_lists_keep_tritons_order():
    assert it.dtypes == ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                         "float16", "float32", "float64"]
    assert it.dtypes_with_bfloat16[-1] == "bfloat16"


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "uint64"])
def test_numpy_random_integers_are_never_zero_and_round_trip(dtype):
    rs = np.random.RandomState(int.from_bytes(np.random.bytes(2), "little"))
    x = it.numpy_random((7, 9), dtype, rs=rs, low=-3, high=3)
    assert x.dtype == np.dtype(dtype) and x.shape == (7, 9) and (x != 0).all()
    arg = it.to_triton(x, "cpu")
    if dtype.startswith("u"):
        assert arg.dtype is getattr(tl, dtype)  # the signed torch tensor seen as unsigned
    np.testing.assert_array_equal(it.to_numpy(arg), x)


def test_bfloat16_data_is_exact_in_bfloat16():
    x = it.numpy_random(64, "bfloat16")
    assert x.dtype == np.float32
    np.testing.assert_array_equal(torch.tensor(x).bfloat16().float().numpy(), x)
    assert it.to_triton(x, "cpu", dst_type="bfloat16").dtype is torch.bfloat16


def test_names_and_targets(monkeypatch):
    assert it.str_to_triton_dtype("bool") is tl.int1
    assert it.str_to_triton_dtype("float8_e5m2") is tl.float8e5
    assert it.torch_dtype_name(torch.int64) == "int64" and it.torch_dtype_name(tl.float16) == "fp16"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert it.is_interpreter() and it.get_current_target() is None
    assert not (it.is_cuda() or it.is_hip() or it.is_hopper() or it.is_hip_cdna())
