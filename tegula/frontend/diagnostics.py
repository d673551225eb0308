"""How the frontend reports problems: its own error type, the wording for Python
constructs a kernel may not use, and the conversion of any exception that escapes a
node visit into a located `CompilationError`.

Messages name the user's construct and types, never tegula internals: a language-layer
error keeps its own message (it was written for kernel authors), an unexpected Python
exception keeps its type name so it can still be reported.
"""
from __future__ import annotations

import ast
from typing import Optional, Sequence

from ..errors import CallSite, CompilationError, TegulaError
from ..ir.core import Loc


class FrontendError(TegulaError):
    """A problem found by the frontend. `loc`, when given, overrides the location of the
    node being visited (e.g. to point at the assignment that changed a variable's type)."""

    def __init__(self, message: str, loc: Optional[Loc] = None):
        super().__init__(message)
        self.message = message
        self.loc = loc


class UnsupportedSyntaxError(FrontendError):
    """Python syntax that @jit functions do not support (Triton's UnsupportedLanguageConstruct)."""


# Each unsupported construct, named the way a user would search for it.
_UNSUPPORTED: dict[type, str] = {
    ast.Break: "'break'",
    ast.Continue: "'continue'",
    ast.Lambda: "'lambda'",
    ast.Try: "'try'",
    ast.With: "'with'",
    ast.AsyncWith: "'async with'",
    ast.AsyncFor: "'async for'",
    ast.Await: "'await'",
    ast.AsyncFunctionDef: "'async def'",
    ast.Delete: "'del'",
    ast.ClassDef: "'class' definitions",
    ast.FunctionDef: "nested function definitions ('def' inside a @jit function)",
    ast.Yield: "'yield'",
    ast.YieldFrom: "'yield from'",
    ast.Global: "'global'",
    ast.Nonlocal: "'nonlocal'",
    ast.Raise: "'raise'",
    ast.Import: "'import'",
    ast.ImportFrom: "'import'",
    ast.SetComp: "set comprehensions",
    ast.DictComp: "dict comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.Dict: "dict displays",
    ast.Set: "set displays",
    ast.NamedExpr: "assignment expressions (':=')",
    ast.Match: "'match'",
    ast.keyword: "'**' argument unpacking",  # only reported for `f(**kwargs)`
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _UNSUPPORTED[ast.TryStar] = "'try'"


_PLURAL = {ast.ClassDef, ast.FunctionDef, ast.SetComp, ast.DictComp, ast.GeneratorExp,
           ast.Dict, ast.Set, ast.NamedExpr}


def unsupported(node: ast.AST, what: Optional[str] = None, plural: bool = False) -> UnsupportedSyntaxError:
    """The error for a construct @jit functions do not support (`what` names it when the
    node's type alone does not)."""
    if what is None:
        what = _UNSUPPORTED.get(type(node)) or f"the Python syntax '{type(node).__name__}'"
        plural = type(node) in _PLURAL
    return UnsupportedSyntaxError(f"{what} {'are' if plural else 'is'} not supported in @jit functions")


# Exceptions whose text is written for the user as is (the language layer raises these
# with kernel-author-facing messages); any other type keeps its name in the message.
_PLAIN_MESSAGE = (TegulaError, TypeError, ValueError, NameError, AssertionError,
                  NotImplementedError, IndexError)


def message_of(exc: BaseException) -> str:
    if isinstance(exc, FrontendError):
        return exc.message
    if isinstance(exc, CompilationError):
        return exc.message
    text = str(exc)
    if isinstance(exc, _PLAIN_MESSAGE) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def user_cause(exc: BaseException) -> Optional[BaseException]:
    """What a located CompilationError keeps as `__cause__`, as Triton does: the error
    the language raised (a ValueError, TypeError, ...), stripped of tegula's internal
    frames (they are shown only with TEGULA_DEBUG_FRONTEND=1); None for tegula's own
    frontend errors, whose message already is the located one."""
    if isinstance(exc, (FrontendError, CompilationError)):
        return None
    return exc.with_traceback(None)


def to_compilation_error(exc: BaseException, loc: Loc, chain: Sequence[CallSite]) -> CompilationError:
    """The located error for an exception that escaped the visit of a node at `loc`."""
    if isinstance(exc, FrontendError) and exc.loc is not None:
        loc = exc.loc
    if isinstance(exc, CompilationError) and exc.loc is not None:
        return exc
    return CompilationError(message_of(exc), loc, chain)
