"""Triton's argument type strings (`*fp32`, `i32`, `**fp16`, `constexpr`, ...) as IR types."""
from __future__ import annotations

from typing import Optional

from ..ir.types import SCALAR_TYPES, PointerType, ScalarType, Type

# Triton's spellings first, then the IR's own and the dtype names, which are accepted too.
_SCALARS: dict[str, ScalarType] = {
    "i1": SCALAR_TYPES["i1"], "u1": SCALAR_TYPES["i1"], "B": SCALAR_TYPES["i1"],
    "i8": SCALAR_TYPES["i8"], "i16": SCALAR_TYPES["i16"], "i32": SCALAR_TYPES["i32"],
    "i64": SCALAR_TYPES["i64"],
    "u8": SCALAR_TYPES["u8"], "u16": SCALAR_TYPES["u16"], "u32": SCALAR_TYPES["u32"],
    "u64": SCALAR_TYPES["u64"],
    "fp16": SCALAR_TYPES["f16"], "bf16": SCALAR_TYPES["bf16"], "fp32": SCALAR_TYPES["f32"],
    "fp64": SCALAR_TYPES["f64"],
    "fp8e4nv": SCALAR_TYPES["f8e4m3"], "fp8e4m3": SCALAR_TYPES["f8e4m3"],
    "fp8e5": SCALAR_TYPES["f8e5m2"], "fp8e5m2": SCALAR_TYPES["f8e5m2"],
    "fp8e4b15": SCALAR_TYPES["f8e4b15"],
    "int1": SCALAR_TYPES["i1"], "int8": SCALAR_TYPES["i8"], "int16": SCALAR_TYPES["i16"],
    "int32": SCALAR_TYPES["i32"], "int64": SCALAR_TYPES["i64"], "uint8": SCALAR_TYPES["u8"],
    "uint16": SCALAR_TYPES["u16"], "uint32": SCALAR_TYPES["u32"], "uint64": SCALAR_TYPES["u64"],
    "float16": SCALAR_TYPES["f16"], "bfloat16": SCALAR_TYPES["bf16"],
    "float32": SCALAR_TYPES["f32"], "float64": SCALAR_TYPES["f64"],
}
_SCALARS.update(SCALAR_TYPES)


def is_constexpr_type(text: str) -> bool:
    return text.strip() == "constexpr"


def parse_arg_type(text: str) -> Type:
    """The IR type of a kernel argument declared as `text` (raises ValueError)."""
    t = _parse(text.strip())
    if t is None:
        raise ValueError(f"unsupported argument type '{text}'")
    return t


def _parse(s: str) -> Optional[Type]:
    if s.startswith("*"):
        inner = s[1:]
        # `*k...` is Triton's const pointer (a `tl.const` parameter): read-only
        const = inner.startswith("k") and (inner[1:] in _SCALARS or inner[1:].startswith("*"))
        if const:
            inner = inner[1:]
        pointee = _parse(inner)
        return None if pointee is None else PointerType(pointee, const=const)
    return _SCALARS.get(s)
