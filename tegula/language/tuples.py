"""`tl.tuple`: Triton's tuple of kernel values. In a tegula kernel, tuples are Python
tuples of values (constexprs, tensors, nested tuples) that the frontend handles at
compile time, so `tl.tuple` is a tuple with Triton's constructor signature; `+` and `==`
work as on Python tuples, with plain tuples too."""
from __future__ import annotations

import builtins
from typing import Any, Iterable


class tuple(builtins.tuple):  # noqa: A001  (Triton's name)
    def __new__(cls, args: Iterable[Any] = (), type: Any = None) -> "tuple":  # noqa: A002
        return super().__new__(cls, args)

    def __add__(self, other: Iterable[Any]) -> "tuple":
        return tuple(builtins.tuple(self) + builtins.tuple(other))

    def __radd__(self, other: Iterable[Any]) -> "tuple":
        return tuple(builtins.tuple(other) + builtins.tuple(self))

    def __repr__(self) -> str:
        return f"tl.tuple({builtins.tuple(self)!r})"
