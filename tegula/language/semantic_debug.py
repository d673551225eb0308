"""Debugging and compiler-hint operations: device_print, device_assert (emitted only in
debug mode), the multiple_of / max_contiguous / max_constancy hints, assume and
debug_barrier.

A hint is an op of its own (HINT) whose result is the hinted value. As in Triton, where
the hint is an attribute set on x itself, the claim also holds for the operand: code
that discards the result (`tl.multiple_of(a_ptrs, 16)` at the top of a loop, as
Triton's grouped GEMM tutorial does) still informs the axis analysis of every use of
a_ptrs, and DCE keeps the hint while a_ptrs is live (`passes/axis_analysis`).
"""
from __future__ import annotations

import string
from typing import Any, Optional, Sequence

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .semantic_base import SemanticBase, fmt_shape
from .tensor import tensor


class DebugMixin(SemanticBase):
    def device_print(self, prefix: str, args: Sequence[Any], hex: bool = False) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"device_print's prefix must be a string, got {prefix!r}")
        if any(ch not in string.printable for ch in prefix):
            raise ValueError(f"device_print's prefix {prefix!r} is not an ascii string")
        # As Triton: a non-empty prefix starts with a space and ends with ": " when values follow.
        if args and not prefix.endswith(" "):
            prefix += " "
        if args and not prefix.endswith(": "):
            prefix = prefix[:-1] + ": "
        if len(prefix) > 2 and not prefix.startswith(" "):
            prefix = " " + prefix
        handles = [self.to_tensor(a).handle for a in args]
        self.builder.create(ir.Op.DEVICE_PRINT, handles, A.PrintAttrs(prefix, bool(hex)), result_types=[])

    def device_assert(self, cond: Any, msg: str = "", mask: Optional[Any] = None) -> None:
        if not self.debug:
            return None
        cond = self.to_tensor(cond)
        if not cond.dtype.is_bool():
            cond = self.cast(cond, T.int1)
        if mask is not None:
            cond = self.or_(cond, self.not_(self.to_tensor(mask)))
        self.builder.create(ir.Op.DEVICE_ASSERT, [cond.handle], A.AssertAttrs(str(msg)), result_types=[])
        return None

    def _hint(self, kind: str, x: Any, values: Sequence[int], allow_scalar: bool) -> tensor:
        x = self.to_tensor(x)
        rank = len(self.shape_of(x))
        expected = max(1, rank) if allow_scalar else rank
        if len(values) != expected:
            raise ValueError(f"Shape of input to {kind} does not match the length of values: input shape "
                             f"{fmt_shape(self.shape_of(x))}, values {list(values)}")
        for i, v in enumerate(values):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"values element {i} must have type `constexpr[int]`, got {v!r}")
        return self.emit_tensor(ir.Op.HINT, x, attrs=A.HintAttrs(kind, tuple(values)), type=x.type)

    def multiple_of(self, x: Any, values: Sequence[int]) -> tensor:
        return self._hint("multiple_of", x, values, allow_scalar=True)

    def max_contiguous(self, x: Any, values: Sequence[int]) -> tensor:
        return self._hint("max_contiguous", x, values, allow_scalar=False)

    def max_constancy(self, x: Any, values: Sequence[int]) -> tensor:
        return self._hint("max_constancy", x, values, allow_scalar=False)

    def assume(self, cond: Any) -> None:
        cond = self.to_tensor(cond)
        if not cond.dtype.is_bool():
            cond = self.cast(cond, T.int1)
        self.builder.create(ir.Op.ASSUME, [cond.handle], result_types=[])

    def debug_barrier(self) -> None:
        self.builder.create(ir.Op.DEBUG_BARRIER, [], result_types=[])
