"""`constexpr_function` (Triton 3.6's `triton.constexpr_function`): a plain Python
function that kernels call at compile time on constexpr values.

    @triton.constexpr_function
    def block_for(n):
        return max(16, triton.next_power_of_2(n))

    @triton.jit
    def kernel(..., N: tl.constexpr):
        BLOCK: tl.constexpr = block_for(N)

Inside a kernel its arguments are unwrapped to Python values and its result becomes a
constexpr (tegula's frontend runs every plain Python callable so; the decorator makes
the intent explicit); called from Python it is the function itself. Its source is part
of the cache key of every kernel that calls it (`dependencies`), so editing it
recompiles them. PyTorch's Inductor recognises it (`ConstexprFunction`) when it copies
a user kernel's dependencies into generated code.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import textwrap
from typing import Any, Callable, Optional


class ConstexprFunction:
    _tegula_constexpr_function = True

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"constexpr_function needs a function, got {type(fn).__name__}")
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._src: Optional[str] = None

    @property
    def src(self) -> str:
        """The function's source, without its decorators."""
        if self._src is None:
            text = textwrap.dedent(inspect.getsource(self.fn))
            start = text.find("def ")
            self._src = text[start:] if start >= 0 else text
        return self._src

    @property
    def cache_key(self) -> str:
        try:
            text = self.src
        except (OSError, TypeError):  # no source: its identity
            text = f"{self.fn.__module__}.{self.fn.__qualname__}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def __call__(self, *args: Any, _semantic: Any = None, **kwargs: Any) -> Any:
        def unwrap(v: Any) -> Any:
            return v.value if type(v).__name__ == "constexpr" and hasattr(v, "value") else v

        return self.fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})

    def __repr__(self) -> str:
        return f"ConstexprFunction({self.fn.__module__}:{self.fn.__qualname__})"


def constexpr_function(fn: Callable[..., Any]) -> ConstexprFunction:
    """Mark `fn` as callable from kernels at compile time (see the module docstring)."""
    return ConstexprFunction(fn)


__all__ = ["ConstexprFunction", "constexpr_function"]
