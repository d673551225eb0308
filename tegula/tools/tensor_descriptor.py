"""`TensorDescriptor`: Triton 3.6's host-side tensor descriptor (`triton.tools.tensor_descriptor`).

A dataclass of a tensor (`base`: a torch tensor or a numpy array), its `shape` and
`strides` (in elements) and the `block_shape` a kernel reads and writes it in, with
`padding` ("zero" or "nan") for the out-of-range part of a block. Passed to a kernel it
is flattened into its base pointer, shape and strides (`runtime.arg_trees`) and the
kernel sees a `tl.tensor_descriptor`, as from `tl.make_tensor_descriptor`, so
`desc.load([m, n])` / `desc.store([m, n], x)` work on every backend. The checks are
Triton's (assertions, with its messages).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

__all__ = ["TensorDescriptor"]

_MAX_NUMEL = 1048576  # Triton's TRITON_MAX_TENSOR_NUMEL


def _address(base: Any) -> int:
    if hasattr(base, "data_ptr"):
        return int(base.data_ptr())
    return int(base.ctypes.data)  # a numpy array


def _itemsize(dtype: Any) -> int:
    size = getattr(dtype, "itemsize", None)
    if size is None:
        import numpy as np

        size = np.dtype(dtype).itemsize
    return int(size)


def _is_floating(dtype: Any) -> bool:
    flag = getattr(dtype, "is_floating_point", None)
    if flag is not None:
        return bool(flag)
    return getattr(dtype, "kind", "") == "f" or "float" in str(dtype)


def validate_block_shape(shape: List[int]) -> int:
    """Triton's `triton._utils.validate_block_shape`: ints, powers of two, at most 2**20 elements."""
    numel = 1
    for i, d in enumerate(shape):
        if not isinstance(d, int):
            raise TypeError(f"Shape element {i} must have type `constexpr[int]`, got `constexpr[{type(d)}]")
        if d <= 0 or d & (d - 1):
            raise ValueError(f"Shape element {i} must be a power of 2")
        numel *= d
    if numel > _MAX_NUMEL:
        raise ValueError(f"numel ({numel}) exceeds triton maximum tensor numel ({_MAX_NUMEL})")
    return numel


@dataclass
class TensorDescriptor:
    base: Any
    shape: List[int]
    strides: List[int]
    block_shape: List[int]
    padding: str = "zero"

    _tegula_host_descriptor = True

    def __post_init__(self) -> None:
        rank = len(self.shape)
        assert len(self.strides) == rank, f"rank mismatch: {self}"
        assert len(self.block_shape) == rank, f"rank mismatch: {self}"
        assert rank > 0, "rank must not be zero"
        assert rank <= 5, "rank cannot be more than 5"
        if type(self.base).__name__ not in ("FakeTensor", "FunctionalTensor"):
            assert _address(self.base) % 16 == 0, "base must be 16-byte aligned"
        validate_block_shape(self.block_shape)
        elem_bytes = _itemsize(self.base.dtype)
        for stride in self.strides[:-1]:
            assert (stride * elem_bytes) % 16 == 0, "strides must be 16-byte aligned"
        assert self.strides[-1] == 1, "Last dimension must be contiguous"
        assert self.padding == "zero" or self.padding == "nan", "Illegal value for padding"
        if self.padding == "nan":
            assert _is_floating(self.base.dtype), "Padding option `nan` is not supported for integer blocks"

    @staticmethod
    def from_tensor(tensor: Any, block_shape: List[int], padding: str = "zero") -> "TensorDescriptor":
        """The descriptor of a whole torch tensor or numpy array."""
        if hasattr(tensor, "stride") and callable(tensor.stride):
            strides = list(tensor.stride())
        else:  # numpy: strides in bytes
            strides = [s // tensor.itemsize for s in tensor.strides]
        return TensorDescriptor(tensor, list(tensor.shape), strides, block_shape, padding)
