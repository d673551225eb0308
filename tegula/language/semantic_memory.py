"""`load` and `store` through a pointer or a tile of pointers, with Triton's checks.

- `other` without `mask` is an error; `mask` and `other` broadcast with the pointer (a
  larger mask broadcasts the pointer too, as in Triton); `other` is cast to the element
  type; a mask must be int1.
- A stored value is broadcast to the pointer's shape and cast to the element type.
- Pointers to int1 are accessed as int8 (one byte per bool), as Triton does.
- Through a block pointer (`make_block_ptr`), a load or store is a `block_load` /
  `block_store` op with the `boundary_check` dimensions and the `padding_option` fill
  (`block_pointers`); the stored value is broadcast to the block and cast to its
  element type; `boundary_check` / `padding_option` on a tensor of pointers are
  errors, as in Triton.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import ir
from ..ir import attrs as A
from . import block_pointers as BP
from . import dtypes as T
from .constexpr import unwrap_constexpr
from .semantic_base import SemanticBase, fmt_shape
from .tensor import tensor

_LOAD_CACHE = ("", ".ca", ".cg", ".cv")
_STORE_CACHE = ("", ".wb", ".cg", ".cs", ".wt")
_EVICTION = ("", "evict_first", "evict_last")


def _check_option(value: Any, allowed: tuple, what: str) -> str:
    value = unwrap_constexpr(value) or ""
    if value not in allowed:
        expected = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{what} {value} not supported (expected one of {expected})")
    return value


class MemoryMixin(SemanticBase):
    def _check_pointer(self, ptr: Any, fn: str) -> tensor:
        if not isinstance(ptr, tensor) or not ptr.dtype.is_ptr():
            what = ptr.type if isinstance(ptr, tensor) else repr(unwrap_constexpr(ptr))
            raise ValueError(f"Unsupported ptr type {what} in `tl.{fn}`: "
                             "expected a pointer or a tensor of pointers")
        return ptr

    def _bool_as_int8(self, ptr: tensor) -> tuple[tensor, bool]:
        elt = ptr.dtype.element_ty
        if elt != T.int1:
            return ptr, False
        return self.cast(ptr, T.pointer_type(T.int8, ptr.dtype.address_space)), True

    def load(self, ptr: Any, mask: Optional[tensor] = None, other: Optional[tensor] = None,
             boundary_check: Any = (), padding_option: str = "", cache_modifier: str = "",
             eviction_policy: str = "", volatile: bool = False) -> tensor:
        if isinstance(ptr, BP.block_ptr):
            return self._load_block(ptr, mask, other, boundary_check, padding_option, cache_modifier,
                                    eviction_policy, volatile)
        ptr = self._check_pointer(ptr, "load")
        cache = _check_option(cache_modifier, _LOAD_CACHE, "Cache modifier")
        eviction = _check_option(eviction_policy, _EVICTION, "Eviction policy")
        padding = unwrap_constexpr(padding_option) or ""
        if padding not in ("", "zero", "nan"):
            raise ValueError(f"Padding option {padding} not supported")
        if mask is None and other is not None:
            raise ValueError("`other` cannot be provided without `mask`")
        if padding or unwrap_constexpr(boundary_check):
            raise ValueError("`padding_option` or `boundary_check` argument is not supported for loading a "
                             "tensor of pointers or loading a scalar. Because the compiler does not know the "
                             "boundary; please use block pointers (defined by `make_block_ptr`) instead")
        if not ptr.type.is_block():
            for name, v in (("Mask", mask), ("Other", other)):
                if v is not None and v.type.is_block():
                    raise ValueError(f"{name} argument cannot be block type if pointer argument is not a "
                                     f"block (got shape {fmt_shape(self.shape_of(v))})")
        if mask is not None and not mask.dtype.is_bool():
            raise ValueError(f"Mask must have boolean scalar type, got {mask.dtype}")
        if ptr.type.is_block():
            if mask is not None:
                ptr, mask = self.broadcast_impl_value(ptr, mask, "load mask")
            if other is not None:
                ptr, other = self.broadcast_impl_value(ptr, other, "load other")
                if mask is not None:
                    ptr, mask = self.broadcast_impl_value(ptr, mask, "load mask")
        ptr, was_bool = self._bool_as_int8(ptr)
        elt = ptr.dtype.element_ty
        if other is not None:
            other = self.cast(other, elt)
        operands = [ptr] + [v for v in (mask, other) if v is not None]
        attrs = A.LoadAttrs(has_mask=mask is not None, has_other=other is not None, cache_modifier=cache,
                            eviction_policy=eviction, volatile=bool(unwrap_constexpr(volatile)))
        result_ty = ptr.type.with_element_ty(elt) if ptr.type.is_block() else elt
        out = self.emit_tensor(ir.Op.LOAD, *operands, attrs=attrs, type=result_ty)
        return self.cast(out, T.int1) if was_bool else out

    def _load_block(self, p: Any, mask: Any, other: Any, boundary_check: Any, padding_option: Any,
                    cache_modifier: Any, eviction_policy: Any, volatile: Any) -> tensor:
        if mask is not None or other is not None:
            raise ValueError("`mask` and `other` arguments cannot be specified for loading block pointers")
        padding = unwrap_constexpr(padding_option) or ""
        if padding not in ("", "zero", "nan"):
            raise ValueError(f"Padding option {padding} not supported")
        cache = _check_option(cache_modifier, _LOAD_CACHE, "Cache modifier")
        eviction = _check_option(eviction_policy, _EVICTION, "Eviction policy")
        return BP.load(self, p, boundary_check, padding, cache, eviction, bool(unwrap_constexpr(volatile)))

    def _store_block(self, p: Any, value: Any, mask: Any, boundary_check: Any, cache_modifier: Any,
                     eviction_policy: Any) -> None:
        if mask is not None:
            raise ValueError("`mask` argument cannot be specified for storing block pointers")
        if p.pointer_type.is_const():
            raise ValueError("Cannot store to a constant pointer")
        cache = _check_option(cache_modifier, _STORE_CACHE, "Cache modifier")
        eviction = _check_option(eviction_policy, _EVICTION, "Eviction policy")
        value = self._fit_value(self.to_tensor(value), None, tuple(p.block_shape))
        BP.store(self, p, self.cast(value, p.pointer_type.element_ty), boundary_check, cache, eviction)

    def _fit_value(self, value: tensor, mask: Optional[tensor], ptr_shape: tuple) -> tensor:
        """`value` broadcast to the shape of a tile of pointers (`mask` must fit it too)."""
        parts = [value] if mask is None else [value, mask]
        shapes = [ptr_shape] + [self.shape_of(p) for p in parts]
        common = self.broadcast_shapes(shapes, "store")
        if common != ptr_shape:
            listed = " and ".join(fmt_shape(s) for s in shapes[1:])
            raise ValueError(f"tl.store: value/mask of shape {listed} "
                             f"do not fit the pointer's shape {fmt_shape(ptr_shape)}")
        return self.broadcast_to_shape(value, ptr_shape)

    def store(self, ptr: Any, value: Any, mask: Optional[tensor] = None, boundary_check: Any = (),
              cache_modifier: str = "", eviction_policy: str = "") -> None:
        if isinstance(ptr, BP.block_ptr):
            return self._store_block(ptr, value, mask, boundary_check, cache_modifier, eviction_policy)
        ptr = self._check_pointer(ptr, "store")
        value = self.to_tensor(value)
        cache = _check_option(cache_modifier, _STORE_CACHE, "Cache modifier")
        eviction = _check_option(eviction_policy, _EVICTION, "Eviction policy")
        if ptr.dtype.is_const():
            raise ValueError("Cannot store to a constant pointer")
        if unwrap_constexpr(boundary_check):
            raise ValueError("`boundary_check` argument is not supported for storing a tensor of pointers or "
                             "storing a scalar. Because the compiler does not know the boundary; please use "
                             "block pointers (defined by `make_block_ptr`) instead")
        if mask is not None and not mask.dtype.is_bool():
            raise ValueError(f"Mask must have boolean scalar type, got {mask.dtype}")
        ptr_shape = self.shape_of(ptr)
        if not ptr.type.is_block():
            if value.type.is_block():
                raise ValueError(f"Value argument cannot be block type if pointer argument is not a block "
                                 f"(got shape {fmt_shape(self.shape_of(value))})")
            if mask is not None and mask.type.is_block():
                raise ValueError(f"Mask argument cannot be block type if pointer argument is not a block "
                                 f"(got shape {fmt_shape(self.shape_of(mask))})")
        else:
            value = self._fit_value(value, mask, ptr_shape)
            if mask is not None:
                mask = self.broadcast_to_shape(mask, ptr_shape)
        ptr, _ = self._bool_as_int8(ptr)
        value = self.cast(value, ptr.dtype.element_ty)
        operands = [ptr.handle, value.handle] + ([mask.handle] if mask is not None else [])
        attrs = A.StoreAttrs(has_mask=mask is not None, cache_modifier=cache, eviction_policy=eviction)
        self.builder.create(ir.Op.STORE, operands, attrs, result_types=[])
        return None
