"""`triton.runtime.errors`: the error classes Triton's runtime raises, under their Triton
names.

`InterpreterError` is what Triton's interpreter raises when a kernel fails while it is
being interpreted (including the compile-time checks of the language, which Triton's
interpreter runs as it executes). tegula's interpreter compiles the kernel first, so
such an error is a `CompilationError` — raised in interpreter mode as
`InterpreterCompilationError`, which is both, so code written for either catches it.
"""
from __future__ import annotations

from ..errors import CompilationError, OutOfResources, TegulaError


class InterpreterError(TegulaError):
    """A kernel failed under the interpreter (`TRITON_INTERPRET=1`)."""


class InterpreterCompilationError(CompilationError, InterpreterError):
    """A compile error of a kernel launched on the interpreter."""

    @classmethod
    def from_error(cls, err: CompilationError) -> "InterpreterCompilationError":
        new = cls(err.message, err.loc, err.call_chain)
        new.args = err.args  # the rendered text, with any notes added to it
        new.__cause__ = err.__cause__
        new.__suppress_context__ = True
        return new


class PTXASError(TegulaError):
    """ptxas rejected the PTX of a kernel."""


__all__ = ["InterpreterCompilationError", "InterpreterError", "OutOfResources", "PTXASError"]
