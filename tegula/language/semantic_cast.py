"""Conversions: `cast` (value conversion, Triton's rules) and `bitcast` (same bits).

- numeric -> numeric: one CAST op; `fp_downcast_rounding` ("rtne" default, or "rtz")
  is only allowed when a float narrows to a smaller float (fp8 included);
- anything -> int1: `x != 0` (as Triton emits it);
- pointer <-> pointer: BITCAST; int -> pointer: INT_TO_PTR; pointer -> int64:
  PTR_TO_INT; pointer -> int1: `ptr_to_int(x) != 0`.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .constexpr import unwrap_constexpr
from .dtypes import dtype
from .semantic_base import SemanticBase
from .tensor import tensor

_ROUNDINGS = ("rtne", "rtz")


class CastMixin(SemanticBase):
    def cast(self, input: Any, dst_ty: Any, fp_downcast_rounding: Optional[str] = None) -> tensor:
        x = self.to_tensor(input)
        dst = T.as_dtype(dst_ty, "the target of a cast").scalar
        src = x.dtype
        rounding = unwrap_constexpr(fp_downcast_rounding)
        if rounding is not None and rounding not in _ROUNDINGS:
            raise ValueError(f"Invalid rounding mode: {rounding}. "
                             "Supported rounding modes are 'rtne' and 'rtz'.")
        if src == dst:
            return x
        dst_full = x.type.with_element_ty(dst) if x.type.is_block() else dst
        fp_narrowing = (src.is_floating() and dst.is_floating()
                        and dst.primitive_bitwidth < src.primitive_bitwidth)
        if rounding is not None and not fp_narrowing:
            raise ValueError("fp_downcast_rounding should be set only for truncating fp conversions. "
                             f"Source scalar type is {src} and destination type is {dst}")

        if src.is_ptr() or dst.is_ptr():
            return self._cast_pointer(x, src, dst, dst_full)
        if dst.is_bool():
            return self.not_equal(x, self.zero_like(x))
        if (src.is_int() or src.is_floating()) and (dst.is_int() or dst.is_floating()):
            attrs = A.CastAttrs(rounding or "rtne")
            return self.emit_tensor(ir.Op.CAST, x, attrs=attrs, type=dst_full)
        raise TypeError(f"cannot cast {src} to {dst}")

    def _cast_pointer(self, x: tensor, src: dtype, dst: dtype, dst_full: dtype) -> tensor:
        if src.is_ptr() and dst.is_ptr():
            if src.to_ir() == dst.to_ir():
                # Only constness differs: the IR value is the same.
                return self.tensor(x.handle, dst_full)
            return self.emit_tensor(ir.Op.BITCAST, x, type=dst_full)
        if src.is_ptr() and dst.is_int():
            if dst.int_bitwidth == 64:
                return self.emit_tensor(ir.Op.PTR_TO_INT, x, type=dst_full)
            if dst.is_bool():
                as_int = self.cast(x, T.int64)
                return self.not_equal(as_int, self.zero_like(as_int))
            raise TypeError(f"cannot cast {src} to {dst}: a pointer converts to tl.int64 (or tl.int1)")
        if src.is_int() and dst.is_ptr():
            return self.emit_tensor(ir.Op.INT_TO_PTR, x, type=dst_full)
        raise TypeError(f"cannot cast {src} to {dst}")

    def without_const(self, ptr: tensor) -> tensor:
        """`ptr` as a plain (non-const) pointer: what a block pointer or a tensor
        descriptor is built on, their types carrying no constness (as in Triton, where
        `make_block_ptr` / `make_tensor_descriptor` of a `tl.const` base make ordinary
        ones). A no-op for a pointer that is not const."""
        if not ptr.dtype.is_const():
            return ptr
        return self.cast(ptr, T.pointer_type(ptr.dtype.element_ty, ptr.dtype.address_space))

    def bitcast(self, input: Any, dst_ty: Any) -> tensor:
        x = self.to_tensor(input)
        dst = T.as_dtype(dst_ty, "the target of a bitcast").scalar
        src = x.dtype
        if src == dst:
            return x
        if src.is_ptr() or dst.is_ptr():
            return self.cast(x, dst)
        if src.primitive_bitwidth != dst.primitive_bitwidth:
            raise ValueError(f"Cannot bitcast data-type of size {src.primitive_bitwidth} to data-type of "
                             f"size {dst.primitive_bitwidth} ({src} to {dst})")
        dst_full = x.type.with_element_ty(dst) if x.type.is_block() else dst
        return self.emit_tensor(ir.Op.BITCAST, x, type=dst_full)
