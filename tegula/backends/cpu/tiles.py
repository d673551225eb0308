"""The values of the CPU lowering and the error-record layout, shared by its mixins.

- `Tile`: a materialized tile value, a stack buffer (row-major, one element per slot);
- `Lazy`: a fused tile value, code that computes element `i` where it is used, so a
  chain of elementwise ops runs as one loop with no buffer between them (`cheap` says
  whether recomputing it per use is fine; an expensive one used where each element is
  read many times, as under a broadcast, is materialized first; `pending`: an
  expensive value with several users, stored into a buffer by its first user — a
  reduction computes it in its own loop, so `exp` and the sum of softmax are one pass);
- `Site`: a checked memory access or runtime check: what its error message needs.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import llvmlite.ir as ir

from ...ir.core import Loc
from ...ir.types import PointerType, element_of, shape_of
from ..llvm.types import llvm_type

# error record (int64 words): flag, site, pid x y z, then per kind: for an access, the
# number of bad elements, of active elements, the first bad linear index, and the byte
# offsets of the first ERR_LIST bad elements
ERR_LIST = 8
ERR_FLAG, ERR_SITE, ERR_PID, ERR_EXTRA = 0, 1, 2, 5
ERR_WORDS = ERR_EXTRA + 3 + ERR_LIST
PTR = ir.PointerType()


def elem_bytes(e: Any) -> int:
    return 8 if isinstance(e, PointerType) else max(e.bits // 8, 1)


def axis_split(shape: tuple, axis: int) -> tuple[int, int, int]:
    """(elements before, along, after) `axis` of a row-major tile of `shape`: element
    (o, i, j) is at flat index (o * n + i) * inner + j."""
    axis = axis if axis >= 0 else axis + len(shape)
    outer = inner = 1
    for d in shape[:axis]:
        outer *= d
    for d in shape[axis + 1:]:
        inner *= d
    return outer, shape[axis], inner


def numel(t: Any) -> int:
    n = 1
    for d in shape_of(t):
        n *= d
    return n


class Tile:
    """A tile value: a stack buffer of `numel` register-typed elements; `flat`: `buf` is
    a pointer to the first element instead (a zero-copy load: the argument's memory
    itself, or a stack buffer, chosen at run time)."""

    __slots__ = ("buf", "ty", "shape", "elem", "flat")

    def __init__(self, buf: ir.Value, ty: Any, flat: bool = False):
        self.buf = buf
        self.ty = ty
        self.shape = tuple(shape_of(ty))
        self.elem = llvm_type(element_of(ty))
        self.flat = flat


class Lazy:
    """A tile value not stored anywhere: `fn(i)` emits element `i` (an i64 linear index);
    `cost` is about how many ops that takes (the fused ops it recomputes)."""

    __slots__ = ("fn", "ty", "shape", "elem", "cheap", "pending", "cost")

    def __init__(self, fn: Callable[[ir.Value], ir.Value], ty: Any, cheap: bool = True, pending: bool = False,
                 cost: int = 1):
        self.fn = fn
        self.ty = ty
        self.shape = tuple(shape_of(ty))
        self.elem = llvm_type(element_of(ty))
        self.cheap = cheap
        self.pending = pending
        self.cost = cost


class Site:
    """A checked memory access or runtime check: what its error message needs (kept in
    the kernel's metadata as JSON, so a kernel loaded from the disk cache reports it)."""

    def __init__(self, kind: str, loc: Optional[Loc], arg: Optional[int], type_name: str, elem_bytes: int,
                 shape: tuple):
        self.kind, self.loc, self.arg, self.type_name = kind, loc, arg, type_name
        self.elem_bytes, self.shape = elem_bytes, tuple(shape)

    def to_json(self) -> list:
        loc = None if self.loc is None else [self.loc.file, self.loc.line, self.loc.col, self.loc.end_col]
        return [self.kind, loc, self.arg, self.type_name, self.elem_bytes, list(self.shape)]

    @classmethod
    def from_json(cls, x: list) -> "Site":
        kind, loc, arg, type_name, elem_bytes, shape = x
        return cls(kind, None if loc is None else Loc(*loc), arg, type_name, elem_bytes, tuple(shape))
