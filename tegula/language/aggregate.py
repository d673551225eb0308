"""`Aggregate`: a kernel-language value made of tensors plus compile-time parts (a
tensor descriptor: base, shape and strides as tensors, block shape and padding as
constants; a block pointer: its one `blockptr` IR value, block shape and order).

The frontend carries an aggregate through `if` / `for` / `while` like a tuple of
tensors: `leaves()` are the tensors that flow through the region boundary, `rebuild`
makes the same kind of value from new tensors, and `static_key()` is what must be equal
for two aggregates to merge (the same block shape and order, say).
"""
from __future__ import annotations

from typing import Any, Iterator


class Aggregate:
    def leaves(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def rebuild(self, leaves: Iterator[Any]) -> "Aggregate":
        raise NotImplementedError

    def static_key(self) -> Any:
        raise NotImplementedError
