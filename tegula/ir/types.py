"""IR types: scalar dtypes, pointer types and tile types, with their text form.

A scalar is a rank-0 value and has a `ScalarType` (or `PointerType`) directly; a tile
has a `TileType` whose shape is static and whose element is a scalar or pointer type.
`SmemType` (a shared-memory buffer handle) exists only in the backend stage `tgir`.
`TensorDescType` is a tensor descriptor (`tl.make_tensor_descriptor`, a host
`TensorDescriptor` argument): a strided global tensor read and written in blocks.
`BlockPtrType` is a block pointer (`tl.make_block_ptr`): a window of a strided tensor
at offsets that `advance` moves.
Types are immutable and hashable; the text form (`i32`, `ptr<f16>`, `tile<128x64xf16>`)
is what the printer writes and the parser reads (`ptr<f32, const>`: a read-only
pointer). In the backend stage `tgir` a tile type also carries an *encoding* (where
its elements live: `tile<128x64xf16, #blocked<...>>`), a value registered with
`ir.encodings`; type equality includes it, so a missing `convert_layout` is a verifier
error there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True)
class ScalarType:
    """A scalar dtype: `i1 i8..i64 u8..u64 f8e4m3 f8e5m2 f8e4b15 f16 bf16 f32 f64`."""

    name: str

    @property
    def bits(self) -> int:
        return _SCALAR_BITS[self.name]

    @property
    def is_bool(self) -> bool:
        return self.name == "i1"

    @property
    def is_int(self) -> bool:
        """Integer, including i1 and the unsigned types."""
        return self.name[0] in "iu"

    @property
    def is_signed(self) -> bool:
        return self.name[0] == "i" and self.name != "i1"

    @property
    def is_unsigned(self) -> bool:
        return self.name[0] == "u" or self.name == "i1"

    @property
    def is_float(self) -> bool:
        return self.name[0] in "fb"

    @property
    def is_fp8(self) -> bool:
        return self.name.startswith("f8")

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name


_SCALAR_BITS = {
    "i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64,
    "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f8e4m3": 8, "f8e5m2": 8, "f8e4b15": 8, "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
}

I1, I8, I16, I32, I64 = (ScalarType(n) for n in ("i1", "i8", "i16", "i32", "i64"))
U8, U16, U32, U64 = (ScalarType(n) for n in ("u8", "u16", "u32", "u64"))
F8E4M3, F8E5M2 = ScalarType("f8e4m3"), ScalarType("f8e5m2")
F16, BF16, F32, F64 = (ScalarType(n) for n in ("f16", "bf16", "f32", "f64"))
SCALAR_TYPES = {n: ScalarType(n) for n in _SCALAR_BITS}


@dataclass(frozen=True)
class PointerType:
    """A pointer to `pointee` in `address_space` (1 = global, 3 = shared). A `const`
    pointer (Triton's `tl.const` parameters, `tl.pointer_type(..., const=True)`) is one
    the kernel only reads through: the language rejects stores and atomics through it,
    and, the flag being part of the type, merging it with a non-const pointer (an `if`,
    a conditional expression, the returns of a function) is a type mismatch, as in
    Triton 3.6. Text: `ptr<f32>`, `ptr<f16, 3>`, `ptr<f32, const>`."""

    pointee: Union[ScalarType, "PointerType"]
    address_space: int = 1
    const: bool = False

    @property
    def bits(self) -> int:
        return 64

    @property
    def bytes(self) -> int:
        return 8

    is_bool = is_int = is_signed = is_unsigned = is_float = is_fp8 = False

    def __str__(self) -> str:
        space = "" if self.address_space == 1 else f", {self.address_space}"
        const = ", const" if self.const else ""
        return f"ptr<{self.pointee}{space}{const}>"

    __repr__ = __str__


ElementType = Union[ScalarType, PointerType]


@dataclass(frozen=True)
class TileType:
    """A tile of static `shape` (each dimension a power of two) of `element`s; in
    `tgir`, `encoding` says where its elements live (None before that stage)."""

    shape: tuple[int, ...]
    element: ElementType
    encoding: Any = None

    def __post_init__(self):
        if not self.shape:
            raise ValueError("a tile has rank >= 1; a scalar uses its element type")

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        enc = f", {self.encoding}" if self.encoding is not None else ""
        return "tile<" + "x".join(str(d) for d in self.shape) + f"x{self.element}{enc}>"

    __repr__ = __str__


@dataclass(frozen=True)
class SmemType:
    """A buffer in shared memory (`tgir` only): `shape` elements of `element`, the
    leading dimension usually the slots of a multi-buffered ring. Its placement (the
    swizzle) is the backend's choice; the value is a handle, read and written by the
    `local_*` and `async_copy` ops."""

    shape: tuple[int, ...]
    element: ScalarType

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return "smem<" + "x".join(str(d) for d in self.shape) + f"x{self.element}>"

    __repr__ = __str__


@dataclass(frozen=True)
class TensorDescType:
    """A tensor descriptor: a strided tensor in global memory that `descriptor_load` /
    `descriptor_store` access in whole blocks of `block` elements of `element`, every
    dimension bounds-checked; a load reads `padding` ("zero" or "nan") outside the
    tensor. The value itself (base, shape, strides) is made by `make_tensor_descriptor`;
    the block shape and padding are static, so they are part of the type, as in
    Triton's `!tt.tensordesc<tensor<...>>`. Text: `tensordesc<64x64xf16>`,
    `tensordesc<32xf32, nan>`."""

    block: tuple[int, ...]
    element: ScalarType
    padding: str = "zero"

    @property
    def rank(self) -> int:
        return len(self.block)

    @property
    def block_type(self) -> "TileType":
        """The type of the tiles it loads and stores."""
        return TileType(self.block, self.element)

    def __str__(self) -> str:
        pad = ", nan" if self.padding == "nan" else ""
        return "tensordesc<" + "x".join(str(d) for d in self.block) + f"x{self.element}{pad}>"

    __repr__ = __str__


@dataclass(frozen=True)
class BlockPtrType:
    """A block pointer: a `block`-shaped window of `element`s at some offsets into a
    strided tensor in global memory (base, shape, strides, offsets are the value, made
    by `make_block_ptr` and moved by `advance`). The block shape and `order` (the
    dimensions fastest first, a layout hint Triton keeps) are static, so they are part
    of the type, as in Triton's `!tt.ptr<tensor<...>>`. Unlike a descriptor, a block
    pointer is loop-carried and merged by `if`s. Text: `blockptr<64x32xf16, order=[1,0]>`."""

    block: tuple[int, ...]
    element: "ElementType"
    order: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.block)

    @property
    def block_type(self) -> "TileType":
        """The type of the tiles it loads and stores."""
        return TileType(self.block, self.element)

    @property
    def pointer(self) -> PointerType:
        """The type of its base pointer."""
        return PointerType(self.element)

    def __str__(self) -> str:
        order = ",".join(str(d) for d in self.order)
        return "blockptr<" + "x".join(str(d) for d in self.block) + f"x{self.element}, order=[{order}]>"

    __repr__ = __str__


Type = Union[ScalarType, PointerType, TileType, SmemType, TensorDescType, BlockPtrType]


def element_of(t: Type) -> ElementType:
    """The element type of a tile, or the type itself for a scalar."""
    return t.element if isinstance(t, TileType) else t


def shape_of(t: Type) -> tuple[int, ...]:
    """The shape of a tile, `()` for a scalar."""
    return t.shape if isinstance(t, TileType) else ()


def with_element(t: Type, element: ElementType) -> Type:
    """`t` with its element type replaced (keeps the shape)."""
    return TileType(t.shape, element, t.encoding) if isinstance(t, TileType) else element


def without_encoding(t: Type) -> Type:
    """`t` with no encoding (what the target-independent type rules compute)."""
    return TileType(t.shape, t.element) if isinstance(t, TileType) and t.encoding is not None else t


def with_shape(element: ElementType, shape: tuple[int, ...]) -> Type:
    """A tile of `shape`, or the scalar `element` itself when shape is `()`."""
    return TileType(tuple(shape), element) if shape else element


def is_pointer(t: Type) -> bool:
    return isinstance(element_of(t), PointerType)


def parse_type(text: str) -> Type:
    """Parse the text form written by `str(type)`."""
    t, rest = _parse_type_prefix(text.strip())
    if rest.strip():
        raise ValueError(f"trailing text after type: {text!r}")
    return t


def _parse_type_prefix(s: str) -> tuple[Type, str]:
    s = s.lstrip()
    if s.startswith("ptr<"):
        inner, rest = _split_angle(s[3:])
        parts = _split_top_comma(inner)
        pointee, tail = _parse_type_prefix(parts[0])
        if tail.strip():
            raise ValueError(f"bad pointer type: {s!r}")
        const = len(parts) > 1 and parts[-1].strip() == "const"
        if const:
            parts = parts[:-1]
        if len(parts) > 2:
            raise ValueError(f"bad pointer type: {s!r}")
        space = int(parts[1]) if len(parts) > 1 else 1
        return PointerType(pointee, space, const), rest
    if s.startswith("tensordesc<"):
        inner, rest = _split_angle(s[len("tensordesc"):])
        parts = _split_top_comma(inner)
        if len(parts) > 2 or (len(parts) == 2 and parts[1] not in ("zero", "nan")):
            raise ValueError(f"bad tensordesc type: {s!r}")
        block = parse_type(f"tile<{parts[0]}>")
        if not isinstance(block.element, ScalarType) or block.encoding is not None:
            raise ValueError(f"bad tensordesc type: {s!r}")
        return TensorDescType(block.shape, block.element, parts[1] if len(parts) == 2 else "zero"), rest
    if s.startswith("blockptr<"):
        inner, rest = _split_angle(s[len("blockptr"):])
        tile, sep, order = inner.partition(", order=[")
        if not sep or not order.endswith("]"):
            raise ValueError(f"bad blockptr type: {s!r}")
        block = parse_type(f"tile<{tile}>")
        if block.encoding is not None:
            raise ValueError(f"bad blockptr type: {s!r}")
        dims = order[:-1].strip()
        return BlockPtrType(block.shape, block.element, tuple(int(d) for d in dims.split(",")) if dims else ()), rest
    if s.startswith("tile<") or s.startswith("smem<"):
        kind = TileType if s.startswith("tile<") else SmemType
        inner, rest = _split_angle(s[4:])
        parts = _split_top_comma(inner) if kind is TileType else [inner]
        if len(parts) > 2:
            raise ValueError(f"bad tile type: {s!r}")
        encoding = None
        if len(parts) == 2:
            from .encodings import parse_encoding

            encoding = parse_encoding(parts[1])
        dims = []
        body = parts[0]
        while body and body[0].isdigit():
            num, _, body = body.partition("x")
            dims.append(int(num))
        elem, tail = _parse_type_prefix(body)
        if tail.strip() or isinstance(elem, (TileType, SmemType)) or not dims:
            raise ValueError(f"bad {kind.__name__[:4].lower()} type: {s!r}")
        return (TileType(tuple(dims), elem, encoding) if kind is TileType else kind(tuple(dims), elem)), rest
    for name in sorted(_SCALAR_BITS, key=len, reverse=True):
        if s.startswith(name) and not (s[len(name):len(name) + 1].isalnum()):
            return SCALAR_TYPES[name], s[len(name):]
    raise ValueError(f"unknown type: {s!r}")


def _split_angle(s: str) -> tuple[str, str]:
    """`s` starts with '<'; return the text inside the matching '>' and the rest."""
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return s[1:i], s[i + 1:]
    raise ValueError(f"unbalanced '<' in type: {s!r}")


def _split_top_comma(s: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return [p.strip() for p in parts]
