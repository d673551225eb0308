"""Argument adapters: how launch arguments reach a backend that runs on the host.

- `MockTensor` stands in for a tensor of a dtype when warming up (`kernel.warmup(
  torch.float32, ...)`), and `TensorWrapper` / `reinterpret` view a tensor's memory as
  another dtype (Triton's `triton.reinterpret`).
- `HostArgs` turns the values of a launch into what the numpy interpreter takes: numpy
  arrays (zero-copy views of CPU torch tensors; bf16 and fp8 tensors are viewed as
  integers of the same width, since the interpreter reads the element type from the
  kernel signature and only needs the bytes) and Python scalars. CUDA tensors, which
  only reach the interpreter when `TEGULA_INTERPRET=1` forces it, are copied to the
  host and the ones the kernel writes are copied back afterwards.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Iterable, Optional, Sequence

from ..errors import KernelArgumentError

_NOT_DTYPES: set = set()  # classes whose instances are never dtypes


class MockTensor:
    """A stand-in for a tensor of `dtype` whose address is assumed 16-byte aligned."""

    __slots__ = ("dtype",)
    _tegula_mock = True

    def __init__(self, dtype: Any):
        self.dtype = dtype

    @staticmethod
    def data_ptr() -> int:
        return 0

    @staticmethod
    def ptr_range() -> int:
        return 0

    @staticmethod
    def wrap_dtype(arg: Any) -> Any:
        """`arg` itself, or a MockTensor when it is a dtype (torch, numpy or tl)."""
        cls = type(arg)
        if cls in _NOT_DTYPES:
            return arg
        if cls.__name__ == "dtype" and (cls.__module__ in ("torch", "numpy")
                                        or cls.__module__.startswith(("tegula.language", "triton.language"))):
            return MockTensor(arg)
        np = sys.modules.get("numpy")
        if np is not None and isinstance(arg, np.dtype):
            return MockTensor(arg)
        # whether an instance is a dtype depends on its class alone (a numpy dtype
        # cannot exist before numpy is imported), so the answer is kept per class
        _NOT_DTYPES.add(cls)
        return arg

    def __repr__(self) -> str:
        return f"MockTensor({self.dtype})"


class TensorWrapper:
    """`base`'s memory seen as elements of `dtype` (same device, same address)."""

    __slots__ = ("base", "dtype")

    def __init__(self, base: Any, dtype: Any):
        self.base = base
        self.dtype = dtype

    def data_ptr(self) -> int:
        base = self.base
        if hasattr(base, "data_ptr"):
            return base.data_ptr()
        return base.ctypes.data  # a numpy array

    @property
    def device(self) -> Any:
        return getattr(self.base, "device", None)

    @property
    def shape(self) -> Any:
        return self.base.shape

    @property
    def data(self) -> Any:
        return self.base.data

    def stride(self, *args: Any) -> Any:
        return self.base.stride(*args)

    def element_size(self) -> int:
        return self.base.element_size()

    def numel(self) -> int:
        return self.base.numel()

    def cpu(self) -> "TensorWrapper":
        return TensorWrapper(self.base.cpu(), self.dtype)

    def copy_(self, other: "TensorWrapper") -> None:
        self.base.copy_(other.base)

    def clone(self) -> "TensorWrapper":
        return TensorWrapper(self.base.clone(), self.dtype)

    def to(self, device: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.to(device), self.dtype)

    def new_empty(self, sizes: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.new_empty(sizes), self.dtype)

    def __str__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base})"


def reinterpret(tensor: Any, dtype: Any) -> Any:
    """View `tensor`'s memory as `dtype` in a kernel (no copy)."""
    if isinstance(tensor, TensorWrapper):
        if dtype == getattr(tensor.base, "dtype", None):
            return tensor.base
        return TensorWrapper(tensor.base, dtype)
    if hasattr(tensor, "data_ptr") or hasattr(tensor, "__array_interface__"):
        return TensorWrapper(tensor, dtype)
    raise TypeError(f"cannot reinterpret a {type(tensor).__name__}")


# ---------------------------------------------------------------------------- host conversion

Writeback = Callable[[], None]


def _torch_view_dtypes() -> dict:
    import torch

    # numpy has no bf16/fp8: view them as integers of the same width (bytes unchanged).
    views = {torch.bfloat16: torch.int16}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        if hasattr(torch, name):
            views[getattr(torch, name)] = torch.uint8
    return views


_TORCH_VIEWS: Optional[dict] = None


def torch_to_numpy(t: Any) -> Any:
    """A zero-copy numpy view of a CPU torch tensor."""
    global _TORCH_VIEWS
    if _TORCH_VIEWS is None:
        _TORCH_VIEWS = _torch_view_dtypes()
    t = t.detach()
    view = _TORCH_VIEWS.get(t.dtype)
    if view is not None:
        t = t.view(view)
    if t.is_conj():
        t = t.resolve_conj()
    return t.numpy()


class _Anchored:
    """`__array_interface__` of a byte view of [low, low + nbytes) whose element [0, 0]
    is at `address` (keeps `owner`, the memory's holder, alive)."""

    def __init__(self, address: int, low: int, nbytes: int, writeable: bool, owner: Any):
        self.owner = owner
        # row 0 runs from the pointer to the end, row 1 from the start: together the
        # whole array, with the pointer at [0, 0] (negative row stride before it)
        n = low + nbytes - address
        self.__array_interface__ = {"shape": (2, n), "typestr": "|u1", "data": (address, not writeable),
                                    "strides": (low - address, 1), "version": 3}


def anchored_view(address: int, low: int, nbytes: int, writeable: bool, owner: Any) -> Any:
    """A uint8 numpy view spanning the bytes [low, low + nbytes), anchored at `address`
    inside them: what the host backends take for a pointer into the middle of an array
    (they bound its accesses by the bytes the view spans)."""
    import numpy as np

    if not low <= address <= low + nbytes:
        raise ValueError(f"address {address:#x} is outside [{low:#x}, {low + nbytes:#x})")
    return np.asarray(_Anchored(address, low, nbytes, writeable, owner))


def _whole_allocation(arr: Any, tensor: Any) -> Any:
    """`arr` (a CPU tensor's numpy view), or where the tensor is a view that covers
    less than its storage, a byte view of the whole storage anchored at the tensor's
    first element: a pointer argument is an address in an allocation, as on a GPU, so
    a kernel may reach elements of the storage outside the view (FlagGems' gather
    passes a view restrided to the index's shape and steps along the gathered dimension
    with its own stride); accesses outside the storage are still reported."""
    from ..backends.host_arrays import byte_span, torch_storage_range

    if tensor._base is None and tensor.storage_offset() == 0 and arr.flags.c_contiguous:
        return arr  # the common case, on every launch: a whole tensor is its allocation
    span = byte_span(arr)
    storage = torch_storage_range(tensor)
    if storage is None or span == (0, 0):
        return arr
    address = int(arr.__array_interface__["data"][0])
    low, nbytes = storage
    if low <= address + span[0] and address + span[1] <= low + nbytes and (span[1] - span[0]) < nbytes:
        return anchored_view(address, low, nbytes, bool(arr.flags.writeable), tensor)
    return arr


def _storage_is_meta(t: Any) -> bool:
    """Whether a tensor subclass holds no data although its device says otherwise (a
    FakeTensor: device cpu, a meta storage at address 0). Asked of subclasses only:
    a plain tensor's launch does not pay for it."""
    try:
        return t.untyped_storage().device.type == "meta"
    except (RuntimeError, NotImplementedError):
        return False  # a subclass without a storage of its own (its own data path decides)


class HostArgs:
    """Converts launch values for a host backend; `written` are the positions (in the
    values given to `convert`) of arguments the kernel stores to."""

    def __init__(self, kernel_name: str, names: Sequence[str], written: Iterable[int] = ()):
        self.kernel_name = kernel_name
        self.names = list(names)
        self.written = frozenset(written)

    def convert(self, values: Sequence[Any]) -> tuple[list[Any], list[Writeback]]:
        out: list[Any] = []
        writebacks: list[Writeback] = []
        for i, v in enumerate(values):
            out.append(self._one(i, v, writebacks))
        return out, writebacks

    def _one(self, i: int, v: Any, writebacks: list[Writeback]) -> Any:
        cls = v.__class__
        if cls is int or cls is float or cls is bool:
            return v
        np = sys.modules.get("numpy")
        if np is not None:
            if cls is np.ndarray:
                return v
            if isinstance(v, np.generic):
                return v.item()
        if isinstance(v, TensorWrapper):
            return self._one(i, v.base, writebacks)
        if isinstance(v, MockTensor):
            raise KernelArgumentError(
                f"argument '{self.names[i]}' of kernel '{self.kernel_name}' is a MockTensor; "
                "MockTensors can only be used with warmup(), not to launch a kernel")
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(v, torch.Tensor):
            device = v.device.type
            if device == "meta" or (type(v) is not torch.Tensor and _storage_is_meta(v)):
                raise KernelArgumentError(
                    f"argument '{self.names[i]}' of kernel '{self.kernel_name}' is a "
                    f"{'meta' if device == 'meta' else 'fake'} tensor: it holds no data (only a shape and a "
                    "dtype, as torch.compile traces with), so no kernel can run on it")
            if device == "cpu":
                return _whole_allocation(torch_to_numpy(v), v)
            return self._copy_torch(i, v, writebacks)
        if np is not None and isinstance(v, np.ndarray):
            return v
        if hasattr(v, "__cuda_array_interface__") and hasattr(v, "get") and hasattr(v, "set"):
            host = v.get()  # CuPy: copy to the host, and back if written
            if i in self.written:
                writebacks.append(lambda v=v, host=host: v.set(host))
            return host
        if hasattr(v, "__array_interface__"):
            return np.asarray(v)
        if hasattr(v, "__dlpack__") and hasattr(v, "__dlpack_device__"):
            if int(v.__dlpack_device__()[0]) == 1:
                return np.from_dlpack(v)
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return float(v)
        if callable(getattr(v, "data_ptr", None)):
            return self._pointer_object(i, v)
        raise KernelArgumentError(
            f"argument '{self.names[i]}' of kernel '{self.kernel_name}' ({type(v).__name__}) "
            "cannot be passed to the interpreter")

    def _pointer_object(self, i: int, v: Any) -> Any:
        """An object that is only a `data_ptr()` (and a dtype) as Triton takes it
        (FlagGems' StridedBuffer: a tensor's memory seen with other strides, negative
        ones included): the live host array holding that address (a CPU tensor among
        the object's attributes, else one found by address), viewed from the pointer —
        the kernel's accesses are checked against that whole array, before the pointer
        too."""
        from ..backends.host_arrays import find_host_array, own_tensor_holding

        address = int(v.data_ptr())
        entry = own_tensor_holding(v, address) or find_host_array(address)
        if entry is None:
            raise KernelArgumentError(
                f"argument '{self.names[i]}' of kernel '{self.kernel_name}' ({type(v).__name__}): its "
                f"data_ptr() {address:#x} is in no live host array (a CPU tensor or numpy array), so a "
                "host backend cannot run the kernel on it")
        return anchored_view(address, entry.low, entry.nbytes, entry.writeable, entry.owner)

    def _copy_torch(self, i: int, t: Any, writebacks: list[Writeback]) -> Any:
        host = t.detach().cpu()
        if i in self.written:
            writebacks.append(lambda t=t, host=host: t.copy_(host))
        return torch_to_numpy(host)
