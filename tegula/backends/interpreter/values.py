"""How IR values live in the interpreter: numpy storage, memory images, scalar coercion.

Three representations of a value of scalar type `t` meet here:
- *storage*: what the interpreter computes with, `numpy_ops.storage_dtype(t)`; bf16 and
  fp8 are float32 holding only values of the narrow type (rounded after every op).
- *memory image*: the bytes a GPU would hold (`memory_dtype`): bf16 as its 16-bit
  pattern, fp8 as its 8-bit code, i1 as one byte (Triton stores bools as i8), pointers
  as 64-bit addresses. Loads, stores and bitcasts go through it, so bf16 <-> i16
  bitcasts move bit patterns, never values.
- *host scalars*: the Python/numpy numbers a launch passes, coerced with wrapping.

Rank-0 values are numpy scalars (or 0-d arrays); tiles are numpy arrays. Values are
never mutated in place, so read-only views (broadcasts, constants) are safe to share.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import KernelArgumentError
from ...ir import numpy_ops as npo
from ...ir.types import ElementType, PointerType, ScalarType

_MEMORY_OVERRIDES = {
    "i1": np.dtype(np.uint8), "bf16": np.dtype(np.uint16),
    "f8e4m3": np.dtype(np.uint8), "f8e5m2": np.dtype(np.uint8), "f8e4b15": np.dtype(np.uint8),
}
_ADDRESS = np.dtype(np.uint64)


def storage_dtype(t: ScalarType) -> np.dtype:
    return npo.storage_dtype(t)


def memory_dtype(t: ElementType) -> np.dtype:
    """The numpy dtype of the in-memory image of one element of type `t`."""
    if isinstance(t, PointerType):
        return _ADDRESS
    return _MEMORY_OVERRIDES.get(t.name) or npo.storage_dtype(t)


def needs_rounding(t: ElementType) -> bool:
    return isinstance(t, ScalarType) and npo.needs_rounding(t)


def to_memory(x: Any, t: ScalarType) -> np.ndarray:
    """Storage values of scalar type `t` → their memory image (same shape)."""
    name = t.name
    if name == "bf16":
        # Values are already bf16-exact, so this conversion only extracts the bits.
        return npo.f32_to_bf16_bits(x)
    if t.is_fp8:
        return npo.fp8_memory_bits(x, name)
    if name == "i1":
        return np.asarray(x).astype(np.uint8)
    return np.asarray(x, dtype=npo.storage_dtype(t))


def from_memory(raw: Any, t: ScalarType) -> np.ndarray:
    """Memory image of scalar type `t` → storage values (same shape)."""
    name = t.name
    if name == "bf16":
        return npo.bf16_bits_to_f32(raw)
    if t.is_fp8:
        return npo.FP8_DECODE[name][raw]
    if name == "i1":
        return np.asarray(raw) != 0
    return raw


def zero(t: ElementType) -> Any:
    """The zero of `t`'s storage dtype as a numpy scalar."""
    return npo.storage_dtype(t).type(0)


def wrap_int(value: int, t: ScalarType) -> int:
    """`value` reduced modulo 2**bits into `t`'s range (two's complement for signed)."""
    bits = t.bits
    v = int(value) & ((1 << bits) - 1)
    if t.is_signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def coerce_scalar(value: Any, t: ScalarType, name: str = "") -> Any:
    """A host scalar → a numpy scalar of `t`'s storage dtype. Integers wrap (as the
    argument registers of a GPU launch would); narrow floats round to nearest even."""
    what = f"argument '{name}'" if name else "scalar"
    try:
        if t.is_bool:
            return np.bool_(bool(value))
        if t.is_int:
            if isinstance(value, (float, np.floating)):
                if not float(value).is_integer():
                    raise KernelArgumentError(f"{what} expects an integer ({t}), got {value!r}")
            return npo.storage_dtype(t).type(wrap_int(int(value), t))
        f = np.float64(float(value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise KernelArgumentError(f"{what} expects a {t} scalar, got {value!r}: {exc}") from None
    if npo.needs_rounding(t):
        return np.float32(npo.round_to_type(f, t))
    return npo.storage_dtype(t).type(f)


def constant_value(value: Any, t: ScalarType) -> Any:
    """A `ConstantAttrs` literal as a numpy scalar of `t` (ints wrap, floats round)."""
    if t.is_float:
        f = np.float64(float(value))
        if npo.needs_rounding(t):
            return np.float32(npo.round_to_type(f, t))
        return npo.storage_dtype(t).type(f)
    if t.is_bool:
        return np.bool_(bool(value))
    return npo.storage_dtype(t).type(wrap_int(int(value), t))
