"""Block pointers: `tl.make_block_ptr`, `tl.advance`, and `tl.load` / `tl.store` through
them, with Triton 3.6's names, arguments and checks.

A block pointer describes a `block_shape` window at `offsets` into a strided array of
`shape` starting at `base`. It reaches the IR as a `blockptr<block x elem, order>`
value (`ir.types.BlockPtrType`): `make_block_ptr base, shape... (i64), strides...
(i64), offsets... (i32)`, `advance p, deltas... (i32)`, and `block_load p` /
`block_store p, value` with the `boundary_check` dimensions and the padding ("zero", or
"nan" for floats: what masked-off elements read) as attributes. `order` is checked
and kept in the type (a layout hint in Triton). The language value is an `Aggregate`
of that one IR value, so block pointers flow through loops and branches
(`p = tl.advance(p, (0, BK))` in a loop carries one `blockptr`). Backends run
`passes.block_pointers_to_pointers`, which turns them into the tile of pointers `base +
sum_d (offsets[d] + arange(block_shape[d])) * strides[d]` (64-bit) and the mask
`0 <= index < shape[d]` of the checked dimensions — what this module emitted before
block pointers were ops. All of Triton's checks stay here, so errors point at the
user's line. As in Triton, `p.advance(offsets)` and `p.store(value, ...)` are methods.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .aggregate import Aggregate
from .constexpr import unwrap_constexpr as U
from .core import builtin
from .tensor import delegate, tensor


class block_ptr(Aggregate):
    """A block pointer (what `tl.make_block_ptr` returns): its IR value (`value`, a
    tensor of a `blockptr` type), the base's pointer type, the block shape and order."""

    def __init__(self, value: tensor, pointer_type: Any, block_shape: tuple, order: tuple):
        self.value, self.pointer_type = value, pointer_type
        self.block_shape, self.order = block_shape, order

    @property
    def dtype(self) -> Any:
        """The pointer type, as Triton's block pointers report it."""
        return self.pointer_type

    @property
    def type(self) -> Any:
        return self.pointer_type

    def leaves(self) -> tuple[Any, ...]:
        return (self.value,)

    def rebuild(self, leaves: Iterator[Any]) -> "block_ptr":
        return block_ptr(next(leaves), self.pointer_type, self.block_shape, self.order)

    def static_key(self) -> Any:
        return (self.block_shape, self.order)

    def __repr__(self) -> str:
        return f"<tl.block_ptr {self.pointer_type} block {list(self.block_shape)}>"

    # Triton's block pointer is a tl.tensor, so its tensor member functions apply:
    # `p.advance(offsets)` and `p.store(value, ...)` (FlagGems' flash attention uses
    # `tl.load(gQ.advance(...))`).
    @property
    def _sem(self):
        return self.value._sem

    advance = delegate("block_pointers", "advance")
    store = delegate("core_builtins", "store")


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
    if base.dtype.element_ty.is_ptr():
        raise ValueError("Block pointers to pointers are not supported")
    block = tuple(int(U(b)) for b in (U(block_shape) if isinstance(U(block_shape), (list, tuple))
                                      else [block_shape]))
    for b in block:
        if b <= 0 or b & (b - 1):
            raise ValueError(f"Expected block_shape to be powers of two, got {list(block)}")
    rank = len(block)
    order_ = tuple(int(U(o)) for o in U(order))
    if sorted(order_) != list(range(rank)):
        raise ValueError(f"Expected a permutation of (0, ..., {rank - 1}) for order, got {list(order_)}")
    parts = (_int_list(sem, shape, "shape", T.int64, rank) + _int_list(sem, strides, "strides", T.int64, rank)
             + _int_list(sem, offsets, "offsets", T.int32, rank))
    base = sem.without_const(base)
    bp_type = ir.BlockPtrType(block, base.dtype.element_ty.to_ir(), order_)
    value = sem.builder.op1(ir.Op.MAKE_BLOCK_PTR, base.handle, *(p.handle for p in parts), type=bp_type)
    return block_ptr(sem.wrap(value), base.type, block, order_)


@builtin
def advance(sem, base, offsets):
    """The block pointer `base` moved by `offsets` (one per dimension)."""
    base = U(base)
    if not isinstance(base, block_ptr):
        raise ValueError(f"tl.advance takes a block pointer (from tl.make_block_ptr), got {describe(base)}")
    deltas = _int_list(sem, offsets, "offsets", T.int32, len(base.block_shape))
    moved = sem.builder.op1(ir.Op.ADVANCE, base.value.handle, *(d.handle for d in deltas))
    return block_ptr(sem.wrap(moved), base.pointer_type, base.block_shape, base.order)


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


def load(sem, p: block_ptr, boundary_check: Any, padding: str, cache: str, eviction: str, volatile: bool) -> tensor:
    """`block_load` of `p`: the block, with `padding` ("", "zero" or "nan") outside the
    checked dimensions."""
    dims = _boundary_dims(boundary_check, len(p.block_shape))
    if dims and padding == "nan" and not p.pointer_type.element_ty.is_floating():
        raise ValueError("Padding option `nan` is not supported for integer block pointers")
    attrs = A.BlockLoadAttrs(dims, "nan" if dims and padding == "nan" else "zero", cache, eviction, volatile)
    return sem.wrap(sem.builder.op1(ir.Op.BLOCK_LOAD, p.value.handle, attrs=attrs))


def store(sem, p: block_ptr, value: tensor, boundary_check: Any, cache: str, eviction: str) -> None:
    """`block_store` of `value` (already the block's shape and element type) through `p`."""
    dims = _boundary_dims(boundary_check, len(p.block_shape))
    sem.builder.create(ir.Op.BLOCK_STORE, [p.value.handle, value.handle], A.BlockStoreAttrs(dims, cache, eviction),
                       result_types=[])
