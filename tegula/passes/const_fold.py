"""Constant folding of elementwise ops from the op table.

A `constant` instruction holds one Python literal, uniform over its tile, so folding an
elementwise op on constants is one scalar evaluation: each literal becomes a 0-d array
of its type's numpy storage dtype, `OP_INFO[op].numpy` computes the result, bf16/fp8
results are rounded with `numpy_ops.round_to_type`, and the value goes back to a Python
literal. The interpreter evaluates the same functions, so a folded kernel computes
exactly what the unfolded one did.

Deliberately not folded: pointer arithmetic (no literal for an address), integer
division or remainder by zero (the hardware result is unspecified), and bitcasts.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..ir import numpy_ops as npo
from ..ir.ops import OP_INFO, Kind, Op
from ..ir.types import PointerType, ScalarType, Type, element_of

# Structural ops whose result, for a uniform operand, is the same uniform literal.
SHAPE_PRESERVING_VALUE = frozenset({Op.SPLAT, Op.BROADCAST, Op.EXPAND_DIMS, Op.RESHAPE, Op.PERMUTE})

_INT_DIVISIONS = frozenset({Op.IDIV, Op.REM})


def scalar_type(t: Type) -> Optional[ScalarType]:
    """The element type of `t` when it is a scalar dtype (not a pointer)."""
    e = element_of(t)
    return e if isinstance(e, ScalarType) else None


def to_array(value: Any, t: ScalarType) -> np.ndarray:
    """A literal as a 0-d array in `t`'s storage dtype (integers wrap to `t`'s width,
    narrow floats are rounded to `t`'s value set)."""
    if t.is_bool:
        return np.array(bool(value))
    if t.is_int:
        bits = t.bits
        v = int(value) & ((1 << bits) - 1)
        if t.is_signed and v >= 1 << (bits - 1):
            v -= 1 << bits
        return np.array(v, dtype=npo.storage_dtype(t))
    with np.errstate(all="ignore"):
        arr = np.array(float(value), dtype=npo.storage_dtype(t))
        if npo.needs_rounding(t):
            arr = np.asarray(npo.round_to_type(arr, t), dtype=npo.storage_dtype(t))
    return arr


def to_literal(arr: Any, t: ScalarType) -> Any:
    """A 0-d storage array (or numpy scalar) of type `t` as a Python literal."""
    arr = np.asarray(arr)
    if t.is_bool:
        return bool(arr)
    if t.is_int:
        return int(arr)
    return float(arr)


def fold(op: Op, attrs: Any, operand_types: Sequence[Type], literals: Sequence[Any],
         result_type: Type) -> Optional[Any]:
    """The literal an elementwise/shape op produces from constant operands, or None
    when the op is not folded. `literals` are the operands' constant values."""
    if op in SHAPE_PRESERVING_VALUE:
        return literals[0] if scalar_type(result_type) is not None else None
    info = OP_INFO[op]
    if info.kind is not Kind.ELEMENTWISE:
        return None
    if any(isinstance(element_of(t), PointerType) for t in (*operand_types, result_type)):
        return None
    rt = scalar_type(result_type)
    in_types = [scalar_type(t) for t in operand_types]
    if rt is None or any(t is None for t in in_types):
        return None
    arrays = [to_array(v, t) for v, t in zip(literals, in_types)]
    if op is Op.CAST:
        with np.errstate(all="ignore"):
            return to_literal(npo.cast_value(arrays[0], in_types[0], rt), rt)
    if info.numpy is None:
        return None
    if op in _INT_DIVISIONS and in_types[1].is_int and not arrays[1]:
        return None
    kwargs = {}
    if op in (Op.MAXIMUM, Op.MINIMUM) and attrs is not None:
        kwargs["propagate_nan"] = attrs.propagate_nan
    with np.errstate(all="ignore"):
        out = np.asarray(info.numpy(*arrays, **kwargs))
        if rt.is_float and npo.needs_rounding(rt):
            out = npo.round_to_type(out, rt)
        out = out.astype(npo.storage_dtype(rt))
    return to_literal(out, rt)


def canonical_literal(value: Any, t: Type) -> Any:
    """`value` normalised to the literal `to_literal(to_array(value))` gives, so that
    equal constants compare equal (used to key constants in CSE)."""
    st = scalar_type(t)
    if st is None:
        return value
    return to_literal(to_array(value, st), st)
