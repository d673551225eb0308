"""Helpers for the frontend tests: a stand-in for the runtime's JITFunction (the same
duck type: `_tegula_jit`, `.fn`, `__name__`), compile options, and `compile_ir`, which
builds a kernel, verifies it and returns its text form."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from tegula.frontend import build_kernel
from tegula.ir.printer import print_ir
from tegula.ir.verifier import verify


class JitStub:
    """What the frontend needs of a @jit function object."""

    _tegula_jit = True

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = fn.__name__

    def __repr__(self) -> str:
        return f"JitStub({self.__name__})"


def jit(fn: Callable) -> JitStub:
    return JitStub(fn)


@dataclass
class Options:
    debug: bool = False
    num_warps: int = 4
    num_stages: int = 3


def build(fn: JitStub, signature: dict[str, str], constexprs: Optional[dict[str, Any]] = None,
          debug: bool = False, arg_attrs: Optional[dict] = None):
    """Build the kernel: `signature` lists the runtime parameters; every parameter
    named in `constexprs` is added to the signature as 'constexpr'."""
    constexprs = dict(constexprs or {})
    full = {}
    for name in inspect.signature(fn.fn).parameters:
        if name in constexprs:
            full[name] = "constexpr"
        elif name in signature:
            full[name] = signature[name]
    return build_kernel(fn, full, constexprs, arg_attrs or {}, Options(debug=debug))


def compile_ir(fn: JitStub, signature: dict[str, str], constexprs: Optional[dict[str, Any]] = None,
               debug: bool = False, locs: bool = False) -> str:
    kernel = build(fn, signature, constexprs, debug)
    verify(kernel)
    return print_ir(kernel, locs=locs)


def line_of(fn: Any, marker: str) -> int:
    """The absolute file line of the first source line of `fn` containing `marker`."""
    pyfn = getattr(fn, "fn", fn)
    lines, first = inspect.getsourcelines(pyfn)
    for i, text in enumerate(lines):
        if marker in text:
            return first + i
    raise AssertionError(f"{marker!r} not found in the source of {pyfn.__name__}")


def column_of(fn: Any, marker: str, snippet: str) -> int:
    """The 1-based column of `snippet` on the line of `fn` that contains `marker`."""
    pyfn = getattr(fn, "fn", fn)
    lines, first = inspect.getsourcelines(pyfn)
    for text in lines:
        if marker in text:
            return text.index(snippet) + 1
    raise AssertionError(f"{marker!r} not found in the source of {pyfn.__name__}")
