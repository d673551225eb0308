"""Device-side tensor descriptors: `tl.make_tensor_descriptor`, `desc.load(offsets)`,
`desc.store(offsets, value)`, `desc.atomic_add/min/max/and/or/xor(offsets, value)`,
`tl.load_tensor_descriptor` and `tl.store_tensor_descriptor` (Triton 3.6 names and
checks).

They reach the IR as ops (`ir.ops`): `make_tensor_descriptor base, shape..., strides...`
gives a `tensordesc<block x elem[, nan]>` value, and `descriptor_load` /
`descriptor_store` / `descriptor_reduce` access one block at `offsets`: every dimension
bounds-checked, out-of-range elements of a load read the padding ("zero" or "nan"), a
store or reduction writes only the in-range part, as a TMA transfer clips. Backends
lower them natively (TMA on Hopper) or run `passes.descriptors_to_pointers`, which
rewrites them into the pointer arithmetic this module used to emit. All of Triton's
checks stay here, so errors point at the user's line.

The language value (`tensor_descriptor`) is the descriptor's parts — base, shape (i32),
strides (i64) — an `Aggregate` carried through loops and branches part by part; the IR
value is made from them where an access needs it, once per block (`_handle`): a
`tensordesc` value never crosses a region boundary (the verifier's rule), and CSE/LICM
merge and hoist the `make_tensor_descriptor`s. A host-side descriptor
(`triton.tools.tensor_descriptor.TensorDescriptor` as a kernel argument) is passed as
its base, shape and strides (`runtime.arg_trees`) and becomes the same
`tensor_descriptor` (`host_descriptor`), with its block shape and padding as
compile-time values.
"""
from __future__ import annotations

from typing import Any, Iterator

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .aggregate import Aggregate
from .constexpr import unwrap_constexpr as U
from .core import builtin
from .tensor import tensor


class tensor_descriptor(Aggregate):
    """What `tl.make_tensor_descriptor` returns."""

    def __init__(self, base: tensor, shape: tuple, strides: tuple, block_shape: tuple, padding: str):
        self.base, self.shape, self.strides = base, shape, strides
        self.block_shape, self.padding = block_shape, padding
        self._made: Any = None  # (IR block, tensordesc value) of the latest make_tensor_descriptor

    @property
    def dtype(self) -> Any:
        """The element type (Triton's `desc.dtype`)."""
        return self.base.dtype.element_ty

    def leaves(self) -> tuple[Any, ...]:
        return (self.base, *self.shape, *self.strides)

    def rebuild(self, leaves: Iterator[Any]) -> "tensor_descriptor":
        n = len(self.block_shape)
        base = next(leaves)
        shape = tuple(next(leaves) for _ in range(n))
        strides = tuple(next(leaves) for _ in range(n))
        return tensor_descriptor(base, shape, strides, self.block_shape, self.padding)

    def static_key(self) -> Any:
        return (self.block_shape, self.padding, str(self.dtype))

    def __repr__(self) -> str:
        return f"<tl.tensor_descriptor {self.dtype} block {list(self.block_shape)}>"

    # ---------------------------------------------------------------- accesses
    def _sem(self) -> Any:
        return self.base._sem

    def ir_type(self) -> ir.Type:
        return ir.TensorDescType(tuple(self.block_shape), self.dtype.to_ir(), self.padding)

    def _handle(self) -> ir.Value:
        """The IR descriptor, made at the insertion point unless this block made it already
        (an earlier value of this block dominates the rest of it)."""
        builder = self._sem().builder
        if self._made is None or self._made[0] is not builder.block:
            parts = [self.base.handle] + [s.handle for s in self.shape] + [s.handle for s in self.strides]
            v = builder.op1(ir.Op.MAKE_TENSOR_DESCRIPTOR, *parts, type=self.ir_type())
            self._made = (builder.block, v)
        return self._made[1]

    def _offsets(self, offsets: Any) -> list[ir.Value]:
        sem = self._sem()
        offsets = U(offsets)
        offsets = list(offsets) if isinstance(offsets, (list, tuple)) else [offsets]
        if len(offsets) != len(self.block_shape):
            raise ValueError(f"expected {len(self.block_shape)} offsets, but got {len(offsets)}")
        out = []
        for o in offsets:
            t = sem.to_tensor(U(o))
            if t.type.is_block() or not t.dtype.is_int():
                raise ValueError(f"descriptor offsets must be integer scalars, got {t.type}")
            out.append(sem.cast(t, T.int32).handle)
        return out

    def load(self, offsets: Any) -> tensor:
        """The block at `offsets`; elements outside the tensor read the padding."""
        offs = self._offsets(offsets)
        sem = self._sem()
        return sem.wrap(sem.builder.op1(ir.Op.DESCRIPTOR_LOAD, self._handle(), *offs))

    def _value(self, value: Any) -> tensor:
        sem = self._sem()
        value = sem.to_tensor(U(value))
        if tuple(sem.shape_of(value)) != tuple(self.block_shape):
            raise ValueError(f"the value's shape {list(sem.shape_of(value))} must be the descriptor's block shape "
                             f"{list(self.block_shape)}")
        return sem.cast(value, self.dtype)

    def store(self, offsets: Any, value: Any) -> None:
        """Write `value` (cast to the element type) to the in-range part of the block."""
        offs = self._offsets(offsets)
        value = self._value(value)
        self._sem().builder.create(ir.Op.DESCRIPTOR_STORE, [self._handle(), *offs, value.handle], result_types=[])

    def _reduce(self, op: str, offsets: Any, value: Any, allowed: tuple) -> None:
        if self.dtype not in allowed:
            raise ValueError(f"descriptor atomic_{op} does not support {self.dtype}")
        offs = self._offsets(offsets)
        value = self._value(value)
        self._sem().builder.create(ir.Op.DESCRIPTOR_REDUCE, [self._handle(), *offs, value.handle],
                                   A.DescriptorReduceAttrs(op), result_types=[])

    def atomic_add(self, offsets: Any, value: Any) -> None:
        self._reduce("add", offsets, value, (T.uint32, T.int32, T.uint64, T.float32, T.float16, T.bfloat16))

    def atomic_min(self, offsets: Any, value: Any) -> None:
        self._reduce("min", offsets, value, (T.uint32, T.int32, T.uint64, T.int64))

    def atomic_max(self, offsets: Any, value: Any) -> None:
        self._reduce("max", offsets, value, (T.uint32, T.int32, T.uint64, T.int64))

    def atomic_and(self, offsets: Any, value: Any) -> None:
        self._reduce("and", offsets, value, (T.uint32, T.int32, T.uint64, T.int64))

    def atomic_or(self, offsets: Any, value: Any) -> None:
        self._reduce("or", offsets, value, (T.uint32, T.int32, T.uint64, T.int64))

    def atomic_xor(self, offsets: Any, value: Any) -> None:
        self._reduce("xor", offsets, value, (T.uint32, T.int32, T.uint64, T.int64))


def _scalars(sem, values: Any, dtype: T.dtype, what: str) -> tuple:
    out = []
    for v in values:
        t = sem.to_tensor(U(v))
        if not t.dtype.is_int() or t.type.is_block():
            raise ValueError(f"Expected integer scalars for the descriptor's {what}, got {t.type}")
        out.append(sem.cast(t, dtype))
    return tuple(out)


@builtin
def make_tensor_descriptor(sem, base, shape, strides, block_shape, padding_option="zero"):
    """A descriptor of the `shape` tensor at `base` with `strides` (the last one 1), for
    blocks of `block_shape` (at least 16 bytes along the last dimension)."""
    base, shape, strides, block_shape = U(base), list(U(shape)), list(U(strides)), list(U(block_shape))
    ndim = len(shape)
    if not 1 <= ndim <= 5:
        raise ValueError(f"Expected 1 <= ndim <= 5 but got {ndim} dimensions")
    if len(strides) != ndim:
        raise ValueError(f"Expected {ndim} strides but got {len(strides)}")
    if len(block_shape) != ndim:
        raise ValueError(f"Expected block_shape to have {ndim} dimensions but got {len(block_shape)}")
    if not isinstance(base, tensor) or not base.dtype.is_ptr() or base.type.is_block():
        raise ValueError(f"Expected `base` to be a scalar pointer, got {getattr(base, 'type', base)!r}")
    block = tuple(int(U(b)) for b in block_shape)
    for b in block:
        if b <= 0 or b & (b - 1):
            raise ValueError(f"Expected block_shape to be powers of two, got {list(block)}")
    elem_size = max(1, base.dtype.element_ty.primitive_bitwidth // 8)
    if block[-1] * elem_size < 16:
        raise ValueError(f"Descriptor block shape must have at least 16 bytes in the last dimension, but got "
                         f"{block[-1]} * {elem_size} = {block[-1] * elem_size} bytes")
    last = U(strides[-1])
    if isinstance(last, tensor) or last != 1:
        got = "a runtime value" if isinstance(last, tensor) else last
        raise ValueError(f"Tensor descriptor last dim must be 1 but got {got}")
    padding = U(padding_option) or "zero"
    if padding not in ("zero", "nan"):
        raise ValueError(f"padding_option must be 'zero' or 'nan', got {padding!r}")
    if padding == "nan" and not base.dtype.element_ty.is_floating():
        raise ValueError("Padding option `nan` is not supported for integer descriptors")
    return tensor_descriptor(sem.without_const(base), _scalars(sem, shape, T.int32, "shape"),
                             _scalars(sem, strides, T.int64, "strides"), block, padding)


@builtin
def load_tensor_descriptor(sem, desc, offsets):
    """`desc.load(offsets)`."""
    return _descriptor(desc).load(offsets)


@builtin
def store_tensor_descriptor(sem, desc, offsets, value):
    """`desc.store(offsets, value)`."""
    return _descriptor(desc).store(offsets, value)


def host_descriptor(sem, leaves: list, block_shape: tuple, padding: str) -> tensor_descriptor:
    """The kernel's view of a host TensorDescriptor argument: `leaves` are its base,
    shape (i32) and strides (i64; the last the constexpr 1)."""
    n = len(block_shape)
    base, shape, strides = leaves[0], leaves[1:1 + n], leaves[1 + n:]
    return tensor_descriptor(base, _scalars(sem, shape, T.int32, "shape"), _scalars(sem, strides, T.int64, "strides"),
                             tuple(int(b) for b in block_shape), padding)


def _descriptor(desc: Any) -> tensor_descriptor:
    desc = U(desc)
    if not isinstance(desc, tensor_descriptor):
        raise ValueError(f"expected a tensor descriptor (from tl.make_tensor_descriptor), got {type(desc).__name__}")
    return desc
