"""Atomic read-modify-write and compare-and-swap through a pointer or a tile of
pointers, with Triton 3.6's typing rules.

- The value (and the mask) broadcast to the pointer's shape; the value is cast to the
  element type; no mask means every lane.
- fp16 and bf16 take `atomic_add` only; 8-bit, int1 and (u)int16 elements take none;
  `atomic_and/or/xor` take integers; `atomic_max/min` take integers (signed or unsigned
  compare by the element type) and fp32/fp64, which Triton implements on the integer
  image of the value: a non-negative float's bits order like a signed int's, a negative
  float's like an unsigned int's in reverse, so max becomes a signed max on the lanes
  whose value is non-negative and an unsigned min on the others (and min the converse).
- `sem` is `acq_rel` (default), `acquire`, `release` or `relaxed`; `scope` is `gpu`
  (default), `cta` or `sys`.
- `atomic_cas(ptr, cmp, val)` takes 16-, 32- or 64-bit elements and no mask.
The result is the tile of values memory held before each lane's operation.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .constexpr import unwrap_constexpr
from .semantic_base import SemanticBase, fmt_shape
from .tensor import tensor


def _option(value: Any, allowed: tuple, default: str, what: str) -> str:
    value = unwrap_constexpr(value)
    if value is None or value == "":
        return default
    if value not in allowed:
        raise ValueError(f"Memory {what} {value} not supported (expected one of "
                         f"{', '.join(repr(a) for a in allowed)})")
    return value


class AtomicMixin(SemanticBase):
    def _atomic_pointer(self, ptr: Any, op: str) -> Any:
        """The element type of the pointer an atomic writes through (checked)."""
        if not isinstance(ptr, tensor) or not ptr.dtype.is_ptr():
            what = ptr.type if isinstance(ptr, tensor) else repr(unwrap_constexpr(ptr))
            raise ValueError(f"Pointer argument of tl.atomic_{op} is {what}: expected a pointer or a "
                             "tensor of pointers")
        if ptr.dtype.is_const():
            raise ValueError("Cannot store to a constant pointer")
        return ptr.dtype.element_ty

    def _atomic_operands(self, ptr: Any, val: Any, mask: Optional[tensor], op: str
                         ) -> tuple[tensor, tensor, Optional[tensor]]:
        """Triton's `atom_red_typechecking_impl`: checks, broadcasts and casts."""
        elem = self._atomic_pointer(ptr, op)
        if elem == T.float16 and op != "add":
            raise ValueError(f"atomic_{op} does not support fp16")
        if elem == T.bfloat16 and op != "add":
            raise ValueError(f"atomic_{op} does not support bf16")
        if elem in (T.int16, T.uint16) or elem.primitive_bitwidth < 16:
            raise ValueError(f"atomic_{op} does not support {elem}")
        val = self.to_tensor(val)
        if mask is not None and not mask.dtype.is_bool():
            raise ValueError(f"Mask must have boolean scalar type, got {mask.dtype}")
        if ptr.type.is_block():
            shape = self.shape_of(ptr)
            parts = [val] if mask is None else [val, mask]
            shapes = [shape] + [self.shape_of(p) for p in parts]
            if self.broadcast_shapes(shapes, f"atomic_{op}") != shape:
                listed = " and ".join(fmt_shape(s) for s in shapes[1:])
                raise ValueError(f"tl.atomic_{op}: value/mask of shape {listed} do not fit the pointer's "
                                 f"shape {fmt_shape(shape)}")
            val = self.broadcast_to_shape(val, shape)
            if mask is not None:
                mask = self.broadcast_to_shape(mask, shape)
        else:
            if val.type.is_block() or (mask is not None and mask.type.is_block()):
                raise ValueError(f"tl.atomic_{op}: the value and mask of an atomic through a scalar pointer "
                                 "must be scalars")
        return ptr, self.cast(val, elem), mask

    def _rmw(self, kind: str, ptr: tensor, val: tensor, mask: Optional[tensor], sem: str, scope: str) -> tensor:
        operands = [ptr.handle, val.handle] + ([mask.handle] if mask is not None else [])
        attrs = A.AtomicAttrs(kind=kind, has_mask=mask is not None, sem=sem, scope=scope)
        v = self.builder.op1(ir.Op.ATOMIC_RMW, *operands, attrs=attrs)
        return tensor(v, val.type, self)

    def _sem_scope(self, sem: Any, scope: Any) -> tuple[str, str]:
        return (_option(sem, A.ATOMIC_SEMS, "acq_rel", "semantic"),
                _option(scope, A.ATOMIC_SCOPES, "gpu", "scope"))

    def atomic_rmw(self, op: str, ptr: Any, val: Any, mask: Optional[tensor], sem: Any, scope: Any) -> tensor:
        """atomic_add / and / or / xor / xchg."""
        ptr, val, mask = self._atomic_operands(ptr, val, mask, op)
        sem, scope = self._sem_scope(sem, scope)
        elem = val.dtype
        if op in ("and", "or", "xor") and not elem.is_int():
            raise ValueError(f"atomic_{op} does not support {elem}: it takes integer elements")
        kind = "fadd" if op == "add" and elem.is_floating() else op
        return self._rmw(kind, ptr, val, mask, sem, scope)

    def atomic_max_min(self, op: str, ptr: Any, val: Any, mask: Optional[tensor], sem: Any,
                       scope: Any) -> tensor:
        """atomic_max / atomic_min (see the module docstring for floats)."""
        ptr, val, mask = self._atomic_operands(ptr, val, mask, op)
        sem, scope = self._sem_scope(sem, scope)
        elem = val.dtype
        if elem.is_int():
            return self._rmw(op, ptr, val, mask, sem, scope)
        if elem not in (T.float32, T.float64):
            raise TypeError(f"atomic_{op} not supported for dtype {elem}")
        bits = elem.primitive_bitwidth
        signed, unsigned = T.get_int_dtype(bits, True), T.get_int_dtype(bits, False)
        space = ptr.dtype.address_space
        s_ptr = self.bitcast(ptr, T.pointer_type(signed, space))
        u_ptr = self.bitcast(ptr, T.pointer_type(unsigned, space))
        s_val, u_val = self.bitcast(val, signed), self.bitcast(val, unsigned)
        negative = self.less_than(s_val, 0)  # the sign bit: -0.0 counts as negative, as in Triton
        positive = self.invert(negative)
        pos_mask = positive if mask is None else self.and_(mask, positive)
        neg_mask = negative if mask is None else self.and_(mask, negative)
        # max: signed max where val >= 0, unsigned min where val < 0; min the converse
        pos_old = self._rmw(op, s_ptr, s_val, pos_mask, sem, scope)
        neg_old = self._rmw("min" if op == "max" else "max", u_ptr, u_val, neg_mask, sem, scope)
        old = self.where(positive, pos_old, self.bitcast(neg_old, signed))
        return self.bitcast(old, elem)

    def atomic_cas(self, ptr: Any, cmp: Any, val: Any, sem: Any, scope: Any) -> tensor:
        elem = self._atomic_pointer(ptr, "cas")
        if elem.primitive_bitwidth not in (16, 32, 64):
            raise ValueError("atomic_cas only supports elements with width {16, 32, 64}")
        sem, scope = self._sem_scope(sem, scope)
        cmp, val = self.to_tensor(cmp), self.to_tensor(val)
        if ptr.type.is_block():
            shape = self.shape_of(ptr)
            cmp, val = self.broadcast_to_shape(cmp, shape), self.broadcast_to_shape(val, shape)
        elif cmp.type.is_block() or val.type.is_block():
            raise ValueError("tl.atomic_cas: cmp and val of an atomic through a scalar pointer must be scalars")
        cmp, val = self.cast(cmp, elem), self.cast(val, elem)
        v = self.builder.op1(ir.Op.ATOMIC_CAS, ptr.handle, cmp.handle, val.handle,
                             attrs=A.AtomicCasAttrs(sem=sem, scope=scope))
        return tensor(v, val.type, self)
