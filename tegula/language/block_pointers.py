"""Block pointers: `tl.make_block_ptr`, `tl.advance`, and `tl.load` / `tl.store` through
them, with Triton 3.6's names, arguments and checks.

A block pointer describes a `block_shape` window at `offsets` into a strided array of
`shape` starting at `base`. tegula needs no IR for it: a load or store through one
becomes the tile of pointers `base + sum_d (offsets[d] + arange(block_shape[d])) *
strides[d]` (in 64-bit, as Triton computes block-pointer addresses) and, for the
dimensions named in `boundary_check`, the mask `0 <= index < shape[d]`; masked-off
elements of a load read `padding_option` ("zero" or "" → 0, "nan" → NaN). `order` is
checked and kept (it is a layout hint in Triton). The value is an `Aggregate`, so block
pointers flow through loops and branches (`p = tl.advance(p, (0, BK))` in a loop).
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from . import dtypes as T
from .aggregate import Aggregate
from .constexpr import unwrap_constexpr as U
from .core import builtin
from .tensor import tensor


class block_ptr(Aggregate):
    """A block pointer (what `tl.make_block_ptr` returns)."""

    def __init__(self, base: tensor, shape: tuple, strides: tuple, offsets: tuple, block_shape: tuple,
                 order: tuple):
        self.base, self.shape, self.strides, self.offsets = base, shape, strides, offsets
        self.block_shape, self.order = block_shape, order

    @property
    def dtype(self) -> Any:
        """The pointer type, as Triton's block pointers report it."""
        return self.base.dtype

    @property
    def type(self) -> Any:
        return self.base.type

    def leaves(self) -> tuple[Any, ...]:
        return (self.base, *self.shape, *self.strides, *self.offsets)

    def rebuild(self, leaves: Iterator[Any]) -> "block_ptr":
        n = len(self.block_shape)
        base = next(leaves)
        parts = [tuple(next(leaves) for _ in range(n)) for _ in range(3)]
        return block_ptr(base, *parts, self.block_shape, self.order)

    def static_key(self) -> Any:
        return (self.block_shape, self.order)

    def __repr__(self) -> str:
        return f"<tl.block_ptr {self.base.dtype} block {list(self.block_shape)}>"


def _int_list(sem, values: Any, what: str, dtype: T.dtype, rank: Optional[int]) -> tuple:
    values = U(values)
    if not isinstance(values, (list, tuple)):
        values = [values]
    if rank is not None and len(values) != rank:
        raise ValueError(f"Expected {what} to have {rank} elements (one per dimension of block_shape), "
                         f"got {len(values)}")
    out = []
    for v in values:
        t = sem.to_tensor(U(v))
        if not (t.dtype.is_int() and not t.type.is_block()):
            raise ValueError(f"Expected a list of integer scalars for {what}, got {t.type}")
        out.append(sem.cast(t, dtype))
    return tuple(out)


@builtin
def make_block_ptr(sem, base, shape, strides, offsets, block_shape, order):
    """A block pointer into the array at `base` of `shape` and `strides`, at `offsets`,
    covering `block_shape` (powers of two), with dimension `order` (fastest first)."""
    base = U(base)
    if not isinstance(base, tensor) or not base.dtype.is_ptr() or base.type.is_block():
        raise ValueError(f"Expected `base` to be a scalar pointer, got {getattr(base, 'type', base)!r}")
    block = tuple(int(U(b)) for b in (U(block_shape) if isinstance(U(block_shape), (list, tuple))
                                      else [block_shape]))
    for b in block:
        if b <= 0 or b & (b - 1):
            raise ValueError(f"Expected block_shape to be powers of two, got {list(block)}")
    rank = len(block)
    order_ = tuple(int(U(o)) for o in U(order))
    if sorted(order_) != list(range(rank)):
        raise ValueError(f"Expected a permutation of (0, ..., {rank - 1}) for order, got {list(order_)}")
    return block_ptr(base, _int_list(sem, shape, "shape", T.int64, rank),
                     _int_list(sem, strides, "strides", T.int64, rank),
                     _int_list(sem, offsets, "offsets", T.int32, rank), block, order_)


@builtin
def advance(sem, base, offsets):
    """The block pointer `base` moved by `offsets` (one per dimension)."""
    base = U(base)
    if not isinstance(base, block_ptr):
        raise ValueError(f"tl.advance takes a block pointer (from tl.make_block_ptr), got {describe(base)}")
    deltas = _int_list(sem, offsets, "offsets", T.int32, len(base.block_shape))
    moved = tuple(sem.add(o, d) for o, d in zip(base.offsets, deltas))
    return block_ptr(base.base, base.shape, base.strides, moved, base.block_shape, base.order)


def describe(x: Any) -> str:
    return f"a tensor of type {x.type}" if isinstance(x, tensor) else f"{type(x).__name__} {x!r}"


def _boundary_dims(boundary_check: Any, rank: int) -> tuple[int, ...]:
    dims = U(boundary_check)
    if dims is None:
        return ()
    if not isinstance(dims, (list, tuple)):
        dims = (dims,)
    out = tuple(sorted({int(U(d)) for d in dims}))
    for d in out:
        if not 0 <= d < rank:
            raise ValueError(f"boundary_check dimension {d} is out of range for a block pointer of rank {rank}")
    return out


def pointers_and_mask(sem, p: block_ptr, boundary_check: Any) -> tuple[tensor, Optional[tensor]]:
    """The tile of pointers a block pointer covers, and the in-bounds mask of the
    checked dimensions (None when none is checked)."""
    rank = len(p.block_shape)
    dims = _boundary_dims(boundary_check, rank)
    addr: Optional[tensor] = None
    mask: Optional[tensor] = None
    for d, size in enumerate(p.block_shape):
        idx = sem.add(sem.arange(0, size), p.offsets[d])  # int32, as Triton's offsets
        for _ in range(d):
            idx = sem.expand_dims(idx, 0)
        for _ in range(rank - 1 - d):
            idx = sem.expand_dims(idx, -1)
        term = sem.mul(sem.cast(idx, T.int64), p.strides[d])
        addr = term if addr is None else sem.add(addr, term)
        if d in dims:
            inside = sem.logical_and(sem.greater_equal(idx, 0), sem.less_than(sem.cast(idx, T.int64), p.shape[d]))
            mask = inside if mask is None else sem.and_(mask, inside)
    addr = sem.broadcast_to_shape(addr, p.block_shape)
    if mask is not None:
        mask = sem.broadcast_to_shape(mask, p.block_shape)
    return sem.add(p.base, addr), mask


def padding_value(sem, p: block_ptr, padding_option: str) -> Optional[Any]:
    """What masked-off elements of a block-pointer load read."""
    if padding_option == "nan":
        if not p.base.dtype.element_ty.is_floating():
            raise ValueError("Padding option `nan` is not supported for integer block pointers")
        return float("nan")
    return 0
