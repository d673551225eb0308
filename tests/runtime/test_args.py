"""Argument adapters for host backends: zero-copy numpy views, scalars, write-back."""
from __future__ import annotations

import numpy as np
import pytest

from tegula.errors import KernelArgumentError
from tegula.runtime.args import HostArgs, MockTensor, TensorWrapper, reinterpret, torch_to_numpy

torch = pytest.importorskip("torch")


def _convert(*values, written=()):
    return HostArgs("k", [f"a{i}" for i in range(len(values))], written).convert(values)


def test_numpy_arrays_and_scalars_pass_through():
    a = np.arange(4, dtype=np.float32)
    out, wbs = _convert(a, 3, 2.5, True, np.int64(7), np.float32(1.5), np.bool_(False))
    assert out[0] is a and out[1:] == [3, 2.5, True, 7, 1.5, False] and wbs == []
    assert type(out[4]) is int and type(out[5]) is float and type(out[6]) is bool


def test_cpu_tensors_are_zero_copy_views():
    t = torch.zeros(8)
    (view,), _ = _convert(t)
    view[3] = 5.0
    assert t[3].item() == 5.0
    # a view covering less than its storage: the kernel gets the whole allocation,
    # anchored at the view's first element (as a GPU pointer reaches all of it)
    base = torch.zeros(4, 6)
    strided = base[:, 1::2]
    (v2,), _ = _convert(strided)
    assert v2.__array_interface__["data"][0] == strided.data_ptr()
    low = v2.__array_interface__["data"][0] + v2.strides[0]
    assert low == base.data_ptr() and v2.shape[1] == base.nbytes - 4  # from the pointer to the end
    v2[0, 0] = 1  # byte 0 of element [0, 1]
    assert base[0, 1].item() != 0


@pytest.mark.parametrize("dtype, view", [("bfloat16", np.int16), ("float8_e4m3fn", np.uint8),
                                         ("float8_e5m2", np.uint8)])
def test_narrow_float_tensors_are_viewed_as_integers(dtype, view):
    t = torch.ones(4, dtype=getattr(torch, dtype))
    (v,), _ = _convert(t)
    assert v.dtype == view and v.ctypes.data == t.data_ptr()
    assert torch_to_numpy(t.requires_grad_(False)).dtype == view


def test_tensor_that_requires_grad():
    t = torch.ones(4, requires_grad=True)
    (v,), _ = _convert(t)
    assert v.ctypes.data == t.data_ptr()


def test_wrapper_passes_the_base_memory():
    t = torch.zeros(4, dtype=torch.float32)
    w = reinterpret(t, torch.int32)
    assert isinstance(w, TensorWrapper) and w.data_ptr() == t.data_ptr() and w.dtype == torch.int32
    assert reinterpret(w, torch.float32) is t
    (v,), _ = _convert(w)
    assert v.ctypes.data == t.data_ptr()
    a = np.zeros(4, np.float32)
    assert reinterpret(a, np.int32).data_ptr() == a.ctypes.data
    with pytest.raises(TypeError):
        reinterpret(3, np.int32)


def test_mock_tensors_cannot_be_launched():
    with pytest.raises(KernelArgumentError, match="MockTensors can only be used with warmup"):
        _convert(MockTensor(torch.float32))


def test_mock_tensor_wraps_dtypes_only():
    assert isinstance(MockTensor.wrap_dtype(torch.float16), MockTensor)
    assert isinstance(MockTensor.wrap_dtype(np.dtype(np.float32)), MockTensor)
    assert MockTensor.wrap_dtype(3) == 3


def test_unknown_objects_are_rejected():
    with pytest.raises(KernelArgumentError, match="argument 'a0' of kernel 'k'"):
        _convert(object())


def test_gpu_copies_are_written_back_only_when_written():
    class FakeCupy:
        __cuda_array_interface__ = {}

        def __init__(self):
            self.data = np.arange(4, dtype=np.float32)
            self.sets = 0

        def get(self):
            return self.data.copy()

        def set(self, host):
            self.data[...] = host
            self.sets += 1

    read, written = FakeCupy(), FakeCupy()
    (r, w), wbs = _convert(read, written, written=[1])
    w[0] = 42.0
    r[0] = 42.0
    for wb in wbs:
        wb()
    assert written.data[0] == 42.0 and written.sets == 1
    assert read.data[0] == 0.0 and read.sets == 0
