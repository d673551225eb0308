"""Objects that are only a `data_ptr()` and a dtype, as Triton takes pointer arguments
(FlagGems' StridedBuffer: a tensor's memory seen with other strides, an offset, negative
strides for `flip`), on the host backends: the kernel reads and writes the memory of the
tensor holding that address, bounds-checked against all of it."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import tegula as triton  # noqa: E402
import tegula.language as tl  # noqa: E402
from tegula.errors import KernelArgumentError, TegulaError  # noqa: E402


class StridedView:
    """A FlagGems-style buffer: base tensor, element offset and strides of its own."""

    def __init__(self, base, offset, shape, strides):
        self._base = base
        self.dtype = base.dtype
        self.shape, self._strides, self.offset = shape, strides, offset
        self.device = base.device

    def data_ptr(self):
        return self._base.data_ptr() + self.offset * self._base.element_size()

    def stride(self):
        return self._strides


@triton.jit
def _copy_strided(src_ptr, dst_ptr, n, stride_src, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs * stride_src, mask=mask) * 2, mask=mask)


@pytest.fixture(params=["interpreter", "cpu"])
def host_backend(request, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TEGULA_INTERPRET", "1" if request.param == "interpreter" else "0")
    monkeypatch.setenv("TEGULA_CPU_BACKEND", "1" if request.param == "cpu" else "0")
    _copy_strided.clear_cache()
    return request.param


def test_a_flipped_view_is_read_backwards(host_backend):
    """flip as FlagGems writes it: the pointer at the base's last element, stride -1 (the
    reads go below the pointer, inside the base); the output is a view at an offset."""
    base = torch.randn(37)
    out_base = torch.zeros(40)
    src = StridedView(base, 36, (37,), (-1,))
    dst = StridedView(out_base, 3, (37,), (1,))
    _copy_strided[(1,)](src, dst, 37, -1, BLOCK=64)
    torch.testing.assert_close(out_base[3:], base.flip(0) * 2)
    assert torch.count_nonzero(out_base[:3]) == 0


def test_reading_past_the_base_is_reported(host_backend):
    """The accesses are checked against the base tensor: a stride that walks past its
    end is an out-of-bounds error naming the argument, not a read of other memory; the
    offsets it shows count from the base's first element, as for any argument."""
    base = torch.randn(16)
    with pytest.raises(TegulaError, match=r"'src_ptr': 8 of 16 accessed f32 elements lie outside the buffer of 16 "
                                          r"elements; element offsets from the buffer start: \[16, 17,"):
        _copy_strided[(1,)](StridedView(base, 8, (16,), (1,)), torch.zeros(16), 16, 1, BLOCK=16)


def test_an_address_in_no_host_array_is_refused(host_backend):
    class Dangling:
        dtype = torch.float32

        def data_ptr(self):
            return 16

    with pytest.raises(KernelArgumentError, match="in no live host array"):
        _copy_strided[(1,)](Dangling(), torch.zeros(4), 4, 1, BLOCK=4)


def test_fake_tensors_hold_no_host_memory(host_backend):
    """A FakeTensor left alive by torch.compile's tracing says it is on the CPU, but its
    storage is a meta one at address 0: a small dangling address must still be refused,
    not resolved to it and read (it crashed the interpreter)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    class Dangling:
        dtype = torch.float32

        def data_ptr(self):
            return 16

    with FakeTensorMode():
        fake = torch.empty(1000)
    with pytest.raises(KernelArgumentError, match="in no live host array"):
        _copy_strided[(1,)](Dangling(), torch.zeros(4), 4, 1, BLOCK=4)
    del fake


@pytest.mark.parametrize("kind", ["meta", "fake"])
def test_a_tensor_without_data_is_refused(host_backend, kind):
    """A meta tensor, or a FakeTensor from torch.compile's tracing (device cpu, meta
    storage), passed to a launch: a clear error naming the argument, not torch's
    `.numpy()` or copy error from inside the launcher."""
    if kind == "meta":
        x = torch.empty(16, device="meta")
    else:
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            x = torch.empty(16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's, once a process, on data_ptr() of a FakeTensor
        with pytest.raises(KernelArgumentError, match=f"'src_ptr' of kernel '_copy_strided' is a {kind} tensor: "
                                                      "it holds no data"):
            _copy_strided[(1,)](x, torch.zeros(16), 16, 1, BLOCK=16)


def test_a_view_reaches_the_rest_of_its_storage(host_backend):
    """A tensor argument is an address in an allocation, as on a GPU: a view restrided
    to the index's shape (FlagGems' gather: stride 0 along the gathered dimension, the
    kernel stepping with the real stride) reads elements of its storage outside the
    view; outside the storage is still an out-of-bounds error."""
    base = torch.randn(6, 5)
    view = base.as_strided((6, 1), (5, 0))  # column 0 only, as the kernel receives it
    out = torch.zeros(6)
    _copy_strided[(1,)](view[:, 0], out, 5, 6, BLOCK=8)  # stride 6: the diagonal of base
    torch.testing.assert_close(out[:5], torch.diagonal(base)[:5] * 2)
    with pytest.raises(TegulaError, match="out-of-bounds load through pointer argument 'src_ptr'"):
        _copy_strided[(1,)](view[:, 0], torch.zeros(8), 8, 6, BLOCK=8)  # element 42 of 30
