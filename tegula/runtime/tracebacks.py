"""Tracebacks a kernel author reads: their own frames, none of tegula's.

An error of a launch (`kernel[grid](...)`, `kernel.warmup(...)`, an autotuned or
heuristics-wrapped kernel) already says everything at the user's file:line:col; the
5-12 frames of tegula's runtime, compiler and frontend that Python would print above it
are noise. Two things remove them without a `sys.excepthook` (pytest, IPython and
notebooks print tracebacks their own way, and a library must not replace the hook):

- `strip_internal_frames(exc)` rebuilds `exc.__traceback__` without tegula's frames,
  keeping the user's (a grid lambda, a pre-run hook, a heuristic). The public entry
  points re-raise through it.
- A frame that re-raises is itself part of the traceback, so the entry points are
  *located* code: generated functions whose every instruction is attributed to the
  `def` line of the user's kernel (`located_code`). The one frame between the user's
  call line and the message reads `File "their_file.py", line N, in kernel` and shows
  their `def` line, which is what a call of a Python function would show.

Only errors that are the user's to fix are trimmed: tegula's own errors (`TegulaError`),
and any exception raised in user code the launch called back. An unexpected exception
inside tegula (a bug) keeps every frame, for the bug report. `TEGULA_DEBUG_FRONTEND=1`
keeps every frame of everything.
"""
from __future__ import annotations

import ast
import os
import types
from functools import partial
from typing import Any, Callable, Optional

from .. import python_ast
from ..config import knobs
from ..errors import TegulaError

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Code objects of located entry points: they are internal although their file is the
# user's. A plain set, not a weak one: code objects compare by value, and a launcher
# rebuilt when a launch hook comes or goes is equal to the one it replaces, which lingers
# in a reference cycle with its namespace until the cyclic GC runs. A weak set kept only
# the old one (adding an equal element is a no-op) and dropped it at that collection, so
# the live launcher stopped counting as internal (a profiler's Python call stack showed
# it as a frame of the user's). A located code object per launcher variant stays alive.
_LOCATED: set[types.CodeType] = set()


def is_internal(code: types.CodeType) -> bool:
    """Whether frames running `code` are tegula's own."""
    name = code.co_filename
    return name.startswith(_PACKAGE_DIR) or name.startswith("<tegula") or code in _LOCATED


def _user_raised(tb: Optional[types.TracebackType]) -> bool:
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and not is_internal(last.tb_frame.f_code)


def strip_internal_frames(exc: BaseException) -> BaseException:
    """`exc`, its traceback without tegula's frames when the error is the user's to fix
    (see the module docstring); returned for `raise strip_internal_frames(e)`."""
    tb = exc.__traceback__
    if knobs.debug_frontend or not (isinstance(exc, TegulaError) or _user_raised(tb)):
        return exc
    kept = []
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code):
            kept.append(tb)
        tb = tb.tb_next
    new: Optional[types.TracebackType] = None
    for entry in reversed(kept):
        new = types.TracebackType(new, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return exc.with_traceback(new)


def def_site(fn: Any) -> tuple[str, int, str]:
    """(file, line, source text) of the `def` of the Python function under a kernel
    object (a JITFunction, or an Autotuner/Heuristics stack around one)."""
    while not hasattr(fn, "__code__") and hasattr(fn, "fn"):
        fn = fn.fn
    code = getattr(fn, "__code__", None)
    if code is None:
        return "<kernel>", 1, ""
    import linecache

    line = code.co_firstlineno
    for n in range(line, line + 50):  # skip decorators
        text = linecache.getline(code.co_filename, n)
        if not text:
            break
        if text.lstrip().startswith(("def ", "async def ")):
            return code.co_filename, n, text
    return code.co_filename, line, linecache.getline(code.co_filename, line)


def located_code(source: str, site: tuple[str, int, str], namespace: dict) -> None:
    """exec `source` with every instruction attributed to the `def` line at `site`;
    its code objects are marked internal (see the module docstring)."""
    filename, line, text = site
    tree = python_ast.parse(source)
    indent = len(text) - len(text.lstrip())
    end = max(len(text.rstrip()), indent + 1)
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = line
            node.col_offset, node.end_col_offset = indent, end
    code = python_ast.compile_tree(tree, filename, "exec")
    _mark(code)
    exec(code, namespace)


def _mark(code: types.CodeType) -> None:
    _LOCATED.add(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _mark(const)


_ENTRY_SOURCE = """
def {name}(_tg_call, *args, **kwargs):
    try:
        return _tg_call(*args, **kwargs)
    except BaseException as _tg_e:
        raise _tg_strip(_tg_e)
"""
_ENTRIES: dict[tuple, Callable[..., Any]] = {}


def located_entry(kernel: Any, name: str) -> Callable[..., Any]:
    """A function `name(call, *args, **kwargs)` calling `call(*args, **kwargs)`, located
    at `kernel`'s `def` line, that re-raises errors trimmed. Cached per site and name."""
    fn = kernel
    while not hasattr(fn, "__code__") and hasattr(fn, "fn"):
        fn = fn.fn
    key = (getattr(fn, "__code__", None), name)
    entry = _ENTRIES.get(key)
    if entry is None:
        site = def_site(kernel)
        fname = name if name.isidentifier() else "launch"
        ns: dict[str, Any] = {"_tg_strip": strip_internal_frames}
        located_code(_ENTRY_SOURCE.format(name=fname), site, ns)
        entry = _ENTRIES[key] = ns[fname]
    return entry


class public_entry:
    """Method decorator for a kernel's public entry points (`warmup`, `run`): the method
    is called through `located_entry`, so its errors reach the user trimmed."""

    def __init__(self, method: Callable[..., Any]):
        self.method = method
        self.__doc__ = method.__doc__
        self.__name__ = method.__name__

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self.method
        entry = located_entry(obj, getattr(obj, "__name__", self.__name__))
        bound = self.method.__get__(obj, cls)
        call = partial(entry, bound)
        call.__wrapped__ = bound  # type: ignore[attr-defined]  # inspect.signature shows the method's
        # Kept on the instance, which shadows this (non-data) descriptor: later reads are
        # one dict lookup. Per-call code such as Triton's tutorial 02, which calls
        # `kernel.warmup(...)` before every launch, paid ~3 us per read for the partial.
        # A class that pickles its instances leaves these names out of the state.
        if isinstance(getattr(obj, "__dict__", None), dict):
            obj.__dict__[self.__name__] = call
        return call
