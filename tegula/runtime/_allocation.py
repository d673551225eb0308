"""`triton.set_allocator` and `triton.runtime._allocation`: the function that gives a
launch device memory it needs besides its arguments (Triton's "global scratch", used for
tensor descriptors built on the device), as Triton 3.6 defines it.

An allocator is called as `allocator(size, alignment, stream)` and returns an object with
`data_ptr()`; `NullAllocator`, the default, refuses with Triton's message. The choice is
a context variable, so threads and async tasks can hold their own.

tegula's kernels ask for scratch through `allocate_scratch` when their metadata says
they need some (`global_scratch_size`). Today none does: device-side tensor descriptors
lower to pointer arithmetic on every backend. The TMA lowering of descriptors built on
the device (the tensor-core work) will allocate through here.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Optional, Protocol


class Buffer(Protocol):
    def data_ptr(self) -> int: ...


class Allocator(Protocol):
    def __call__(self, size: int, alignment: int, stream: Optional[int]) -> Buffer: ...


class NullAllocator:
    """The default: no allocation is possible until `triton.set_allocator` is called."""

    def __call__(self, size: int, alignment: int, stream: Optional[int]) -> Buffer:
        raise RuntimeError("Kernel requires a runtime memory allocation, but no allocator was set. "
                           "Use triton.set_allocator to specify an allocator.")


_NULL_ALLOCATOR = NullAllocator()
_allocator: ContextVar[Allocator] = ContextVar("_allocator", default=_NULL_ALLOCATOR)


def set_allocator(allocator: Allocator) -> None:
    """Use `allocator` for the scratch memory kernels launched from this context need."""
    if not callable(allocator):
        raise TypeError(f"set_allocator expects a callable (size, alignment, stream) -> buffer, got {allocator!r}")
    _allocator.set(allocator)


def allocate_scratch(size: int, alignment: int, stream: Optional[int]) -> Any:
    """Scratch for one launch from the current allocator (None when `size` is 0)."""
    if size <= 0:
        return None
    return _allocator.get()(size, alignment, stream)
