"""Triton 3.6 dtypes: scalar types, `pointer_type`, `block_type`, and their IR mapping.

Names, string forms and predicates follow Triton (`str(tl.float32) == "fp32"`,
`tl.int1.is_int_unsigned()`, `repr(tl.float16) == "triton.language.float16"`); dtypes
compare and hash by name, so they can be used as constexpr values and dict keys.
`to_ir()` / `from_ir()` convert to and from `tegula.ir` types. The fp8 variants that the
IR has no type for (`fp8e4b8`, `fp8e5b16`, AMD's) exist as names, but using them in a
kernel raises a clear error.
"""
from __future__ import annotations

import enum
from typing import Sequence

from .. import ir
from ..ir import types as irt
from .base import base_type
from .constexpr import is_power_of_two, unwrap_constexpr

TRITON_MAX_TENSOR_NUMEL = 1048576

_SINT = ("int8", "int16", "int32", "int64")
_UINT = ("int1", "uint8", "uint16", "uint32", "uint64")
_FP = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64")
_STANDARD_FP = ("fp16", "bf16", "fp32", "fp64")

# name -> (primitive bitwidth, mantissa width, exponent bias) for floats
_FP_INFO = {
    "fp8e4b15": (8, 3, 15), "fp8e4nv": (8, 3, 7), "fp8e4b8": (8, 3, 8), "fp8e5": (8, 2, 15),
    "fp8e5b16": (8, 2, 16), "fp16": (16, 10, 15), "bf16": (16, 7, 127), "fp32": (32, 23, 127),
    "fp64": (64, 52, 1023),
}

_TO_IR_NAME = {
    "int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "fp8e5": "f8e5m2", "fp8e4nv": "f8e4m3", "fp8e4b15": "f8e4b15",
    "fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64",
}
_FROM_IR_NAME = {v: k for k, v in _TO_IR_NAME.items()}


class dtype(base_type):
    """A scalar element type. Subclasses: `pointer_type`, `block_type`."""

    SINT_TYPES = list(_SINT)
    UINT_TYPES = list(_UINT)
    FP_TYPES = list(_FP)
    STANDARD_FP_TYPES = list(_STANDARD_FP)
    OTHER_TYPES = ["void"]

    class SIGNEDNESS(enum.Enum):
        SIGNED = 0
        UNSIGNED = 1

    class KIND(enum.Enum):
        BOOLEAN = 0
        INTEGRAL = 1
        FLOATING = 2

    def __init__(self, name: str):
        name = unwrap_constexpr(name)
        if name not in _SINT + _UINT + _FP + ("void",):
            raise ValueError(f"unknown dtype name {name!r}")
        self.name = name
        if name in _SINT or name in _UINT:
            self.int_signedness = dtype.SIGNEDNESS.SIGNED if name in _SINT else dtype.SIGNEDNESS.UNSIGNED
            self.int_bitwidth = int(name.split("int")[-1])
            self.primitive_bitwidth = self.int_bitwidth
        elif name in _FP:
            self.primitive_bitwidth, self.fp_mantissa_width, self.exponent_bias = _FP_INFO[name]
        else:
            self.primitive_bitwidth = 0
        self.itemsize = self.primitive_bitwidth // 8

    # ------------------------------------------------------------------ predicates
    def is_fp8(self) -> bool:
        return self.name.startswith("fp8")

    def is_fp8e4nv(self) -> bool:
        return self.name == "fp8e4nv"

    def is_fp8e4b8(self) -> bool:
        return self.name == "fp8e4b8"

    def is_fp8e4b15(self) -> bool:
        return self.name == "fp8e4b15"

    def is_fp8e5(self) -> bool:
        return self.name == "fp8e5"

    def is_fp8e5b16(self) -> bool:
        return self.name == "fp8e5b16"

    def is_fp16(self) -> bool:
        return self.name == "fp16"

    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def is_fp32(self) -> bool:
        return self.name == "fp32"

    def is_fp64(self) -> bool:
        return self.name == "fp64"

    def is_int1(self) -> bool:
        return self.name == "int1"

    def is_int8(self) -> bool:
        return self.name == "int8"

    def is_int16(self) -> bool:
        return self.name == "int16"

    def is_int32(self) -> bool:
        return self.name == "int32"

    def is_int64(self) -> bool:
        return self.name == "int64"

    def is_uint8(self) -> bool:
        return self.name == "uint8"

    def is_uint16(self) -> bool:
        return self.name == "uint16"

    def is_uint32(self) -> bool:
        return self.name == "uint32"

    def is_uint64(self) -> bool:
        return self.name == "uint64"

    def is_floating(self) -> bool:
        return self.name in _FP

    def is_standard_floating(self) -> bool:
        return self.name in _STANDARD_FP

    def is_int_signed(self) -> bool:
        return self.name in _SINT

    def is_int_unsigned(self) -> bool:
        return self.name in _UINT

    def is_int(self) -> bool:
        return self.name in _SINT or self.name in _UINT

    def is_integer_type(self) -> bool:
        return self.is_int()

    def is_bool(self) -> bool:
        return self.name == "int1"

    def is_void(self) -> bool:
        return self.name == "void"

    def is_block(self) -> bool:
        return False

    def is_ptr(self) -> bool:
        return False

    def is_const(self) -> bool:
        return False

    def kind(self) -> "dtype.KIND":
        """bool < integer < floating: the order Triton's scalar promotion compares."""
        if self.is_bool():
            return dtype.KIND.BOOLEAN
        if self.is_int():
            return dtype.KIND.INTEGRAL
        if self.is_floating():
            return dtype.KIND.FLOATING
        raise TypeError(f"{self} has no numeric kind")

    def get_int_max_value(self) -> int:
        if self.is_int_signed():
            return 2 ** (self.int_bitwidth - 1) - 1
        if self.is_int_unsigned():
            return 2 ** self.int_bitwidth - 1
        raise TypeError(f"{self} is not an integer type")

    def get_int_min_value(self) -> int:
        if self.is_int_signed():
            return -(2 ** (self.int_bitwidth - 1))
        if self.is_int_unsigned():
            return 0
        raise TypeError(f"{self} is not an integer type")

    @staticmethod
    def is_dtype(type_str: str) -> bool:
        return type_str in _SINT + _UINT + _FP + ("void",)

    # ------------------------------------------------------------------ structure
    @property
    def scalar(self) -> "dtype":
        return self

    def with_element_ty(self, element_ty: "dtype") -> "dtype":
        return element_ty

    def to_ir(self, builder=None) -> ir.Type:
        """The `tegula.ir` type of this dtype (`builder` is accepted for Triton parity)."""
        if self.name in _TO_IR_NAME:
            return irt.SCALAR_TYPES[_TO_IR_NAME[self.name]]
        if self.name == "void":
            raise TypeError("void has no IR type")
        raise TypeError(f"tegula does not support {self.name}; use tl.float8e4nv or tl.float8e5")

    # ------------------------------------------------------------------ identity
    def __eq__(self, other) -> bool:
        other = unwrap_constexpr(other)
        return isinstance(other, dtype) and type(other) is type(self) and self.name == other.name

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self.name,))

    def __str__(self) -> str:
        return self.name

    def codegen_name(self) -> str:
        if self.name.startswith("fp"):
            return "float" + self.name[2:]
        if self.name.startswith("bf"):
            return "bfloat" + self.name[2:]
        return self.name

    @property
    def cache_key_part(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"triton.language.{self.codegen_name()}"

    def mangle(self) -> str:
        if self.is_int():
            return ("i" if self.is_int_signed() else "u") + str(self.int_bitwidth)
        return self.name


class pointer_type(dtype):
    """A pointer to `element_ty` in `address_space` (1 = global memory); `const=True`
    makes it a pointer to read-only memory (`const_pointer<fp32>`), which `tl.store`
    and the atomics reject and which does not merge with a non-const pointer."""

    def __init__(self, element_ty: dtype, address_space: int = 1, const: bool = False):
        element_ty = unwrap_constexpr(element_ty)
        if not isinstance(element_ty, dtype):
            raise TypeError(f"element_ty has type `{type(element_ty).__name__}`; expected `dtype`.")
        self._element_ty = element_ty
        self.address_space = unwrap_constexpr(address_space)
        self.const = bool(unwrap_constexpr(const))
        self.name = f"const_pointer<{element_ty}>" if self.const else f"pointer<{element_ty}>"
        self.primitive_bitwidth = 64
        self.itemsize = 8

    @property
    def element_ty(self) -> dtype:
        return self._element_ty

    def is_ptr(self) -> bool:
        return True

    def is_const(self) -> bool:
        return self.const

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def is_fp8(self) -> bool:
        return False

    def to_ir(self, builder=None) -> ir.Type:
        return irt.PointerType(self.element_ty.to_ir(), self.address_space, self.const)

    def __eq__(self, other) -> bool:
        other = unwrap_constexpr(other)
        return (isinstance(other, pointer_type) and self.element_ty == other.element_ty
                and self.address_space == other.address_space and self.const == other.const)

    def __hash__(self) -> int:
        return hash((self.name, self.address_space))

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def mangle(self) -> str:
        return f"P{self.element_ty.mangle()}"


class block_type(dtype):
    """A tile of `shape` (ints, each a power of two) of `element_ty` scalars or pointers."""

    def __init__(self, element_ty: dtype, shape: Sequence[int]):
        self._element_ty = unwrap_constexpr(element_ty)
        if not isinstance(shape, (list, tuple)):
            raise TypeError(f"block shape must be a list or tuple, got {type(shape).__name__}")
        self._shape = tuple(int(unwrap_constexpr(s)) for s in shape)
        if not self._shape:
            raise TypeError("0d block_type is forbidden")
        self.numel = validate_block_shape(self._shape)
        self.name = f"<{self._shape}, {self._element_ty}>"
        self.primitive_bitwidth = self._element_ty.primitive_bitwidth

    @property
    def element_ty(self) -> dtype:
        return self._element_ty

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def scalar(self) -> dtype:
        return self._element_ty

    def is_block(self) -> bool:
        return True

    def is_ptr(self) -> bool:
        return False

    def get_block_shapes(self) -> tuple[int, ...]:
        return self._shape

    def with_element_ty(self, scalar_ty: dtype) -> "block_type":
        return block_type(scalar_ty, self._shape)

    @property
    def nbytes(self) -> int:
        return self.numel * (self._element_ty.primitive_bitwidth // 8)

    def to_ir(self, builder=None) -> ir.Type:
        return irt.TileType(self._shape, self._element_ty.to_ir())

    def __eq__(self, other) -> bool:
        other = unwrap_constexpr(other)
        return (isinstance(other, block_type) and self.element_ty == other.element_ty
                and self.shape == other.shape)

    def __hash__(self) -> int:
        return hash((self.name,))

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def mangle(self) -> str:
        return f"{self.scalar.mangle()}S{'_'.join(map(str, self._shape))}S"


def validate_block_shape(shape: Sequence[int]) -> int:
    """Check a tile shape (ints, powers of two, at most TRITON_MAX_TENSOR_NUMEL elements);
    return its element count."""
    numel = 1
    for i, d in enumerate(shape):
        d = unwrap_constexpr(d)
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"Shape element {i} must have type `constexpr[int]`, "
                            f"got `constexpr[{type(d).__name__}]`")
        if not is_power_of_two(d):
            raise ValueError(f"Shape element {i} must be a power of 2, got {d}")
        numel *= d
    if numel > TRITON_MAX_TENSOR_NUMEL:
        raise ValueError(f"numel ({numel}) exceeds triton maximum tensor numel ({TRITON_MAX_TENSOR_NUMEL})")
    return numel


void = dtype("void")
int1 = dtype("int1")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
uint16 = dtype("uint16")
uint32 = dtype("uint32")
uint64 = dtype("uint64")
float8e5 = dtype("fp8e5")
float8e5b16 = dtype("fp8e5b16")
float8e4nv = dtype("fp8e4nv")
float8e4b8 = dtype("fp8e4b8")
float8e4b15 = dtype("fp8e4b15")
float16 = dtype("fp16")
bfloat16 = dtype("bf16")
float32 = dtype("fp32")
float64 = dtype("fp64")
pi32_t = pointer_type(int32)

_BY_NAME = {d.name: d for d in (
    int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float8e5, float8e5b16, float8e4nv,
    float8e4b8, float8e4b15, float16, bfloat16, float32, float64, void)}


def get_int_dtype(bitwidth: int, signed: bool) -> dtype:
    bitwidth, signed = unwrap_constexpr(bitwidth), unwrap_constexpr(signed)
    if bitwidth == 1:
        return int1
    name = ("int" if signed else "uint") + str(bitwidth)
    if name not in _BY_NAME:
        raise ValueError(f"Unsupported bitwidth {bitwidth} and signedness {signed}")
    return _BY_NAME[name]


def from_ir(t: ir.Type) -> dtype:
    """The dtype of a `tegula.ir` type: scalar, pointer, tile or block pointer."""
    if isinstance(t, irt.TileType):
        return block_type(from_ir(t.element), t.shape)
    if isinstance(t, irt.PointerType):
        return pointer_type(from_ir(t.pointee), t.address_space, t.const)
    if isinstance(t, irt.BlockPtrType):  # Triton's type of a block pointer
        return pointer_type(block_type(from_ir(t.element), t.block))
    if isinstance(t, irt.ScalarType):
        return _BY_NAME[_FROM_IR_NAME[t.name]]
    raise TypeError(f"not an IR type: {t!r}")


_SIGNATURE_NAMES = {
    "fp8e4nv": float8e4nv, "fp8e4b8": float8e4b8, "fp8e5": float8e5, "fp8e5b16": float8e5b16,
    "fp8e4b15": float8e4b15, "fp16": float16, "bf16": bfloat16, "fp32": float32, "fp64": float64,
    "i1": int1, "i8": int8, "i16": int16, "i32": int32, "i64": int64,
    "u1": int1, "u8": uint8, "u16": uint16, "u32": uint32, "u64": uint64, "B": int1,
}


def str_to_ty(name: str) -> dtype:
    """The dtype of a Triton signature string: `*fp32`, `*k*i8` (const), `i32`, `bf16`..."""
    name = unwrap_constexpr(name)
    if name.startswith("*"):
        rest, const = name[1:], False
        if rest.startswith("k"):
            rest, const = rest[1:], True
        return pointer_type(str_to_ty(rest), const=const)
    if name in _SIGNATURE_NAMES:
        return _SIGNATURE_NAMES[name]
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise ValueError(f"unknown type in signature: {name!r}")


def as_dtype(x, what: str = "dtype") -> dtype:
    """`x` (a dtype, possibly in a constexpr, or a dtype name) as a dtype, else a clear error."""
    x = unwrap_constexpr(x)
    if isinstance(x, dtype):
        return x
    if isinstance(x, str) and (x in _BY_NAME or x in _SIGNATURE_NAMES or x.startswith("*")):
        return str_to_ty(x)
    raise TypeError(f"{what} must be a tl.dtype (e.g. tl.float32), got {x!r}")

