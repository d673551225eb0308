"""Helpers for located-error tests: a stand-in @jit wrapper (the runtime's duck type),
building a kernel expecting a CompilationError, and the expected `file:line:col` of a
marked source line, computed from the source so that edits never break the tests."""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pytest

import tegula.frontend
from tegula.errors import CompilationError
from tegula.frontend import build_kernel

# tegula's package directory: no message may mention a file inside it.
TEGULA_DIR = os.path.dirname(os.path.dirname(os.path.abspath(tegula.frontend.__file__)))


class JitStub:
    _tegula_jit = True

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = fn.__name__


def jit(fn: Callable) -> JitStub:
    return JitStub(fn)


@dataclass
class Options:
    debug: bool = False
    num_warps: int = 4
    num_stages: int = 3


def compile_error(fn: JitStub, signature: Optional[dict[str, str]] = None,
                  constexprs: Optional[dict[str, Any]] = None, debug: bool = False) -> CompilationError:
    """Build `fn` and return the CompilationError it must raise."""
    constexprs = dict(constexprs or {})
    full = {}
    for name in inspect.signature(fn.fn).parameters:
        full[name] = "constexpr" if name in constexprs else (signature or {}).get(name, "i32")
    with pytest.raises(CompilationError) as info:
        build_kernel(fn, full, constexprs, {}, Options(debug=debug))
    return info.value


def where(fn: Any, marker: str, snippet: str) -> str:
    """`/abs/file.py:LINE:COL` of `snippet` on the line of `fn`'s source that contains
    the comment `marker` (columns 1-based, as in the error's first line)."""
    pyfn = getattr(fn, "fn", fn)
    lines, first = inspect.getsourcelines(pyfn)
    for i, text in enumerate(lines):
        if marker in text:
            return f"{os.path.abspath(inspect.getsourcefile(pyfn))}:{first + i}:{text.index(snippet) + 1}"
    raise AssertionError(f"marker {marker!r} not found in {pyfn.__name__}")


def check(err: CompilationError, fn: Any, marker: str, snippet: str, message: Optional[str] = None,
          contains: Optional[str] = None) -> None:
    """The error is located at `snippet` on the marked line, says `message` exactly (or
    contains `contains`), shows the source line, and names no tegula-internal file."""
    text = str(err)
    head = text.splitlines()[0]
    prefix = f"{where(fn, marker, snippet)}: error: "
    assert head.startswith(prefix), f"{head!r} does not start with {prefix!r}"
    if message is not None:
        assert head[len(prefix):] == message
    if contains is not None:
        assert contains in head[len(prefix):]
    assert snippet in text.splitlines()[1], "the source line is shown under the message"
    assert TEGULA_DIR + os.sep not in text
    # No internal frames for Python to print: the cause, when there is one (the language's
    # own ValueError/TypeError, kept as Triton keeps it), carries no traceback.
    assert err.__suppress_context__
    assert err.__cause__ is None or err.__cause__.__traceback__ is None
    import traceback
    shown = "".join(traceback.format_exception(err.__cause__)) if err.__cause__ is not None else ""
    assert TEGULA_DIR + os.sep not in shown
