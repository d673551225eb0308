"""Arithmetic, bitwise, comparison and selection operators with Triton 3.6 typing.

Every binary operator goes through `binary_op_type_checking`: Python numbers are
"weak" operands (see `semantic_types.computation_type`), both operands are cast to the
computation type, then broadcast to a common shape. Pointer arithmetic (`ptr + int`,
`ptr - int`) becomes ADDPTR; unsigned offsets narrower than 64 bits are zero-extended
first because ADDPTR treats its offset as signed.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .constexpr import unwrap_constexpr
from .core import PropagateNan
from .dtypes import dtype
from .semantic_base import SemanticBase, is_python_number, python_number
from .semantic_types import IncompatibleTypeError, computation_type, integer_promote, python_scalar_dtype
from .tensor import tensor


def _check_ptr_operand(a: dtype, b: dtype, allow_ptr_a: bool, op: str) -> None:
    if a.is_ptr():
        if not allow_ptr_a:
            raise IncompatibleTypeError(a, b, op)
        if b.is_ptr() and a != b:
            raise IncompatibleTypeError(a, b, op)
        if b.is_floating():
            raise IncompatibleTypeError(a, b, op)


class ArithmeticMixin(SemanticBase):
    # ------------------------------------------------------------------ operand typing
    def binary_op_type_checking(self, lhs: Any, rhs: Any, op: str, allow_lhs_ptr: bool = False,
                                allow_rhs_ptr: bool = False, arithmetic_check: bool = True,
                                div_or_mod: bool = False) -> tuple[tensor, tensor]:
        """Cast `lhs` and `rhs` (tensors or Python numbers) to their computation type and
        broadcast them to a common shape. `op` names the operator in error messages."""
        lhs, rhs = python_number(lhs), python_number(rhs)
        lhs_py, rhs_py = is_python_number(lhs), is_python_number(rhs)
        # A Python number becomes one constant, of the final type (no dead constants).
        lhs_t = None if lhs_py else self.to_tensor(lhs)
        rhs_t = None if rhs_py else self.to_tensor(rhs)
        a = python_scalar_dtype(lhs) if lhs_py else lhs_t.dtype
        b = python_scalar_dtype(rhs) if rhs_py else rhs_t.dtype
        _check_ptr_operand(a, b, allow_lhs_ptr, op)
        _check_ptr_operand(b, a, allow_rhs_ptr, op)
        a_ret, b_ret = a, b
        if arithmetic_check and not a.is_ptr() and not b.is_ptr():
            ret = computation_type(a, lhs_py, b, rhs_py, div_or_mod, op)
            for is_py, value in ((lhs_py, lhs), (rhs_py, rhs)):
                if not is_py or not ret.is_int():
                    continue
                if value < 0 and ret.is_int_unsigned():
                    raise ValueError("Cannot perform a binary operation between an unsigned tensor and a "
                                     "negative scalar. Perform a explicit cast on one of them.")
                if not ret.get_int_min_value() <= value <= ret.get_int_max_value():
                    raise ValueError(f"Scalar {value} is out of range for type {ret}")
            a_ret = b_ret = ret
        lhs_t = self.scalar_constant(lhs, a_ret) if lhs_py else self.cast(lhs_t, a_ret)
        rhs_t = self.scalar_constant(rhs, b_ret) if rhs_py else self.cast(rhs_t, b_ret)
        return self.broadcast_impl_value(lhs_t, rhs_t, op)

    def _binary(self, op: ir.Op, x: tensor, y: tensor, attrs: Any = None) -> tensor:
        return self.emit_tensor(op, x, y, attrs=attrs, type=x.type)

    def _sanitize_overflow(self, x: tensor, y: tensor, op: ir.Op, name: str) -> None:
        """In debug mode, assert that an integer add/sub/mul narrower than 64 bits does not
        overflow (Triton's `sanitize_overflow`): recompute in int64 and range-check."""
        ty = x.dtype
        if not self.debug or not getattr(self.options, "sanitize_overflow", True) or ty.int_bitwidth >= 64:
            return
        wide = self._binary(op, self.cast(x, T.int64), self.cast(y, T.int64))
        lo = self.scalar_constant(ty.get_int_min_value(), T.int64)
        hi = self.scalar_constant(ty.get_int_max_value(), T.int64)
        ok = self.and_(self.less_equal(wide, hi), self.greater_equal(wide, lo))
        self.device_assert(ok, f"int{ty.int_bitwidth} overflow detected for operation {name}", None)

    # ------------------------------------------------------------------ + - * / // %
    def add(self, input: Any, other: Any, sanitize_overflow: bool = True) -> tensor:
        x, y = self.binary_op_type_checking(input, other, "+", True, True)
        if x.dtype.is_ptr() and y.dtype.is_ptr():
            raise TypeError(f"cannot add pointers together ({x.dtype} and {y.dtype})")
        if y.dtype.is_ptr():
            x, y = y, x
        if x.dtype.is_ptr():
            if y.dtype.is_int_unsigned() and y.dtype.int_bitwidth < 64:
                y = self.cast(y, T.int64)
            return self.emit_tensor(ir.Op.ADDPTR, x, y, type=x.type)
        if x.dtype.is_int() and sanitize_overflow:
            self._sanitize_overflow(x, y, ir.Op.ADD, "add")
        return self._binary(ir.Op.ADD, x, y)

    def sub(self, input: Any, other: Any, sanitize_overflow: bool = True) -> tensor:
        x, y = self.binary_op_type_checking(input, other, "-", True, False)
        if x.dtype.is_ptr():
            return self.add(x, self.minus(y), sanitize_overflow=False)
        if x.dtype.is_int() and sanitize_overflow:
            self._sanitize_overflow(x, y, ir.Op.SUB, "sub")
        return self._binary(ir.Op.SUB, x, y)

    def mul(self, input: Any, other: Any, sanitize_overflow: bool = True) -> tensor:
        x, y = self.binary_op_type_checking(input, other, "*")
        if x.dtype.is_int() and sanitize_overflow:
            self._sanitize_overflow(x, y, ir.Op.MUL, "mul")
        return self._binary(ir.Op.MUL, x, y)

    def truediv(self, input: Any, other: Any) -> tensor:
        x, y = self.binary_op_type_checking(input, other, "/", div_or_mod=True)
        if x.dtype.is_int():
            x, y = self.cast(x, T.float32), self.cast(y, T.float32)
        # Triton's `/` is arith.divf: the backend's default (not IEEE-rounded) division.
        return self._binary(ir.Op.FDIV, x, y, A.FDivAttrs(ieee_rounding=False))

    def floordiv(self, input: Any, other: Any) -> tensor:
        x, y = self.binary_op_type_checking(input, other, "//", div_or_mod=True)
        if not x.dtype.is_int():
            raise TypeError(f"unexpected type {x.dtype} for '//': floor division needs integer operands "
                            "(use tl.math.floor(a / b) for floats)")
        return self._binary(ir.Op.IDIV, x, y)

    def fdiv(self, input: Any, other: Any, ieee_rounding: bool = False) -> tensor:
        x, y = self.to_tensor(input), self.to_tensor(other)
        if not x.dtype.is_floating() or not y.dtype.is_floating():
            raise TypeError(f"both operands of fdiv must have floating scalar type, "
                            f"got {x.dtype} and {y.dtype}")
        # Triton does no type promotion here (only broadcasting); mixed types get the usual rule.
        x, y = self.binary_op_type_checking(x, y, "fdiv", arithmetic_check=x.dtype != y.dtype)
        return self._binary(ir.Op.FDIV, x, y, A.FDivAttrs(ieee_rounding=bool(ieee_rounding)))

    def div_rn(self, input: Any, other: Any) -> tensor:
        x, y = self.binary_op_type_checking(self.to_tensor(input), self.to_tensor(other), "div_rn")
        return self._binary(ir.Op.DIV, x, y)

    def mod(self, input: Any, other: Any) -> tensor:
        x, y = self.binary_op_type_checking(input, other, "%", div_or_mod=True)
        if x.dtype.is_floating() or x.dtype.is_int():
            return self._binary(ir.Op.REM, x, y)
        raise TypeError(f"unexpected type {x.dtype} for '%'")

    # ------------------------------------------------------------------ bitwise
    def bitwise_op_type_checking(self, input: Any, other: Any, op: str) -> tuple[tensor, tensor]:
        x, y = self.binary_op_type_checking(input, other, op)
        if not x.dtype.is_int() or not y.dtype.is_int():
            raise IncompatibleTypeError(x.dtype, y.dtype, op)
        ret = integer_promote(x.dtype, y.dtype)
        return self.cast(x, ret), self.cast(y, ret)

    def and_(self, input: Any, other: Any) -> tensor:
        return self._binary(ir.Op.AND, *self.bitwise_op_type_checking(input, other, "&"))

    def or_(self, input: Any, other: Any) -> tensor:
        return self._binary(ir.Op.OR, *self.bitwise_op_type_checking(input, other, "|"))

    def xor_(self, input: Any, other: Any) -> tensor:
        return self._binary(ir.Op.XOR, *self.bitwise_op_type_checking(input, other, "^"))

    def shl(self, input: Any, other: Any) -> tensor:
        return self._binary(ir.Op.SHL, *self.bitwise_op_type_checking(input, other, "<<"))

    def rshift(self, input: Any, other: Any, arithmetic: bool) -> tensor:
        """`>>`: arithmetic when `arithmetic` (Triton: the left operand's own dtype is signed),
        else logical, whatever signedness the promoted type has."""
        x, y = self.bitwise_op_type_checking(input, other, ">>")
        ty = x.dtype
        if ty.is_bool() or ty.is_int_signed() == arithmetic:
            return self._binary(ir.Op.SHR, x, y)
        # SHR's kind follows its type's signedness: reinterpret to get the requested kind.
        alt = T.get_int_dtype(ty.int_bitwidth, arithmetic)
        r = self._binary(ir.Op.SHR, self.bitcast(x, alt), self.bitcast(y, alt))
        return self.bitcast(r, ty)

    def ashr(self, input: Any, other: Any) -> tensor:
        return self.rshift(input, other, True)

    def lshr(self, input: Any, other: Any) -> tensor:
        return self.rshift(input, other, False)

    # ------------------------------------------------------------------ unary
    def plus(self, input: tensor) -> tensor:
        return input

    def minus(self, input: Any) -> tensor:
        x = self.to_tensor(input)
        if x.dtype.is_ptr():
            raise ValueError(f"wrong type argument to unary minus ({x.dtype})")
        if x.dtype.is_floating():
            # Triton computes 0 - x, so -(0.0) is +0.0 there; keep that.
            return self.sub(self.zero_like(x), x, sanitize_overflow=False)
        return self.emit_tensor(ir.Op.NEG, x, type=x.type)

    def invert(self, input: Any) -> tensor:
        x = self.to_tensor(input)
        if x.dtype.is_ptr() or x.dtype.is_floating():
            raise ValueError(f"wrong type argument to unary invert ({x.dtype})")
        return self.emit_tensor(ir.Op.NOT, x, type=x.type)

    def _as_bool(self, x: Any) -> tensor:
        x = self.to_tensor(x)
        return x if x.dtype.is_bool() else self.cast(x, T.int1)

    def not_(self, input: Any) -> tensor:
        """Python `not x` on a tensor: logical negation (x == 0 for non-bools)."""
        return self.invert(self._as_bool(input))

    def logical_and(self, input: Any, other: Any) -> tensor:
        return self.and_(self._as_bool(input), self._as_bool(other))

    def logical_or(self, input: Any, other: Any) -> tensor:
        return self.or_(self._as_bool(input), self._as_bool(other))

    # ------------------------------------------------------------------ comparisons
    def _compare(self, op: ir.Op, sym: str, input: Any, other: Any) -> tensor:
        lhs, rhs = self.to_tensor(python_number(input)), self.to_tensor(python_number(other))
        if lhs.dtype.is_ptr() or rhs.dtype.is_ptr():
            # Comparing two pointers of one type is allowed (a tegula extension of Triton).
            if lhs.dtype != rhs.dtype:
                raise IncompatibleTypeError(lhs.dtype, rhs.dtype, sym)
            x, y = self.broadcast_impl_value(lhs, rhs, sym)
        else:
            x, y = self.binary_op_type_checking(input, other, sym)
        return self.emit_tensor(op, x, y, type=x.type.with_element_ty(T.int1))

    def less_than(self, input: Any, other: Any) -> tensor:
        return self._compare(ir.Op.LT, "<", input, other)

    def less_equal(self, input: Any, other: Any) -> tensor:
        return self._compare(ir.Op.LE, "<=", input, other)

    def greater_than(self, input: Any, other: Any) -> tensor:
        return self._compare(ir.Op.GT, ">", input, other)

    def greater_equal(self, input: Any, other: Any) -> tensor:
        return self._compare(ir.Op.GE, ">=", input, other)

    def equal(self, input: Any, other: Any) -> tensor:
        return self._compare(ir.Op.EQ, "==", input, other)

    def not_equal(self, input: Any, other: Any) -> tensor:
        return self._compare(ir.Op.NE, "!=", input, other)

    # ------------------------------------------------------------------ min / max / clamp
    def _min_max(self, op: ir.Op, name: str, x: Any, y: Any, propagate_nan: Any) -> tensor:
        x, y = self.binary_op_type_checking(x, y, name)
        if x.dtype.is_ptr() or not (x.dtype.is_floating() or x.dtype.is_int()):
            raise TypeError(f"Unexpected dtype {x.dtype} for tl.{name}")
        propagate = _propagate_nan_flag(propagate_nan)
        return self._binary(op, x, y, A.NanAttrs(propagate_nan=propagate and x.dtype.is_floating()))

    def minimum(self, x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> tensor:
        return self._min_max(ir.Op.MINIMUM, "minimum", x, y, propagate_nan)

    def maximum(self, x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> tensor:
        return self._min_max(ir.Op.MAXIMUM, "maximum", x, y, propagate_nan)

    def clamp(self, x: Any, min: Any, max: Any, propagate_nan: Any = PropagateNan.NONE) -> tensor:
        min, max = self.binary_op_type_checking(min, max, "clamp")
        x, min = self.binary_op_type_checking(x, min, "clamp")
        x, max = self.binary_op_type_checking(x, max, "clamp")
        if not x.dtype.is_floating():
            raise TypeError(f"Unexpected dtype {x.dtype}. Only floating point clamp is supported")
        x, min, max = self.broadcast_tensors(x, min, max, op="clamp")
        attrs = A.NanAttrs(propagate_nan=_propagate_nan_flag(propagate_nan))
        return self._binary(ir.Op.MINIMUM, self._binary(ir.Op.MAXIMUM, x, min, attrs), max, attrs)

    # ------------------------------------------------------------------ select
    def where(self, condition: Any, x: Any, y: Any) -> tensor:
        cond = self.to_tensor(condition)
        if not cond.dtype.is_bool():
            self.warn(f"tl.where with a non-boolean condition is deprecated and will error out in a "
                      f"future triton release. Got {cond.dtype}")
            cond = self.cast(cond, T.int1)
        x, y = python_number(unwrap_constexpr(x)), python_number(unwrap_constexpr(y))
        x_ty, y_ty = _operand_dtype(x), _operand_dtype(y)
        if x_ty.is_ptr() != y_ty.is_ptr():
            raise IncompatibleTypeError(x_ty, y_ty, "where")
        x, y = self.binary_op_type_checking(x, y, "where", True, True)
        cond, x, y = self.broadcast_tensors(cond, x, y, op="where")
        return self.emit_tensor(ir.Op.SELECT, cond, x, y, type=x.type)

    # ------------------------------------------------------------------ other math
    def umulhi(self, x: Any, y: Any) -> tensor:
        x, y = self.binary_op_type_checking(self.to_tensor(x), self.to_tensor(y), "umulhi")
        return self._binary(ir.Op.UMULHI, x, y)

    def fma(self, x: Any, y: Any, z: Any) -> tensor:
        x, y, z = self.to_tensor(x), self.to_tensor(y), self.to_tensor(z)
        x, y = self.binary_op_type_checking(x, y, "fma")
        z, x = self.binary_op_type_checking(z, x, "fma")
        z, y = self.binary_op_type_checking(z, y, "fma")
        if not x.dtype.is_floating():
            raise TypeError(f"tl.fma needs floating-point operands, got {x.dtype}")
        x, y, z = self.broadcast_tensors(x, y, z, op="fma")
        return self.emit_tensor(ir.Op.FMA, x, y, z, type=x.type)

    def unary_math(self, op: ir.Op, x: Any) -> tensor:
        x = self.to_tensor(x)
        return self.emit_tensor(op, x, type=x.type)


def _operand_dtype(x: Any) -> dtype:
    return x.dtype if isinstance(x, tensor) else python_scalar_dtype(x)


def _propagate_nan_flag(p: Any) -> bool:
    p = unwrap_constexpr(p)
    if isinstance(p, PropagateNan):
        return p is PropagateNan.ALL
    if p is None or isinstance(p, bool):
        return bool(p)
    raise ValueError(f"Unexpected propagate_nan {p!r}; use tl.PropagateNan.NONE or tl.PropagateNan.ALL")


def optional_tensor(sem: ArithmeticMixin, x: Optional[Any]) -> Optional[tensor]:
    x = unwrap_constexpr(x)
    return None if x is None else sem.to_tensor(x)
