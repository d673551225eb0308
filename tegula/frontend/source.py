"""Source capture: from a Python function to its AST and the absolute locations of nodes.

The frontend never looks at bytecode. It reads the function's source text with
`inspect.getsourcelines` (or, for a function made by `exec` of a string, from the text
`exec_sources` saw compiled), dedents it (nested and method definitions are indented),
parses it, and keeps what is needed to turn an AST node's position back into the
user's real file position: the line offset of the function in its file, the
indentation removed from each line, and the UTF-8 byte → character conversion that
`ast` column offsets need on non-ASCII lines.
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import python_ast
from ..ir.core import Loc
from . import exec_sources


class SourceUnavailableError(Exception):
    """The source of a @jit function cannot be read (defined in a REPL, exec, ...)."""


@dataclass(frozen=True)
class FunctionSource:
    """A parsed @jit function and how to map its AST positions to the real file.

    `tree` is the `ast.FunctionDef` (decorators included but never visited);
    `first_line` is the 1-based file line of the first source line (the first
    decorator); `indents[i]` is the number of characters `dedent` removed from the
    i-th (0-based) source line and `lines[i]` the dedented text of that line."""

    name: str
    file: str
    first_line: int
    tree: ast.FunctionDef
    lines: tuple[str, ...]
    indents: tuple[int, ...]
    globals: dict[str, Any]
    closure: dict[str, Any]

    def loc(self, node: ast.AST) -> Loc:
        """The absolute location of `node`: file, line, 0-based column, end column."""
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return self.def_loc
        idx = lineno - 1
        col = self._char_col(idx, node.col_offset)
        end_col: Optional[int]
        end_lineno = getattr(node, "end_lineno", None)
        end_offset = getattr(node, "end_col_offset", None)
        header = getattr(node, "test", None) or getattr(node, "iter", None)
        if isinstance(node, ast.stmt) and isinstance(header, ast.expr) and header.end_lineno == lineno:
            # A compound statement: underline its header (`if cond:`), not its body.
            end_col = self._char_col(idx, header.end_col_offset) + 1
        elif end_lineno == lineno and end_offset is not None:
            end_col = self._char_col(idx, end_offset)
        else:
            # A multi-line node: underline the rest of its first line.
            end_col = self.indents[idx] + len(self.lines[idx].rstrip()) if idx < len(self.lines) else None
        return Loc(self.file, self.first_line + idx, col, end_col)

    @property
    def def_loc(self) -> Loc:
        """Where the `def` keyword of the function is (after its decorators)."""
        return self.loc(self.tree) if hasattr(self.tree, "lineno") else Loc(self.file, self.first_line, 0)

    def _char_col(self, idx: int, byte_col: int) -> int:
        if idx >= len(self.lines):
            return byte_col
        line = self.lines[idx]
        if not line.isascii():
            byte_col = len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))
        return byte_col + self.indents[idx]


def source_lines(pyfn: Callable) -> tuple[list[str], int, str]:
    """The source lines of function `pyfn`, its first line number and its file: from its
    file, or for a function made by `exec` of a string, from that string (the file is
    then a pseudo name `linecache` knows). Raises `SourceUnavailableError`."""
    code = pyfn.__code__
    try:
        lines, first_line = inspect.getsourcelines(pyfn)
        return lines, first_line, inspect.getsourcefile(pyfn) or code.co_filename
    except (OSError, TypeError) as e:
        text = exec_sources.find(code)
        if text is None:
            raise SourceUnavailableError(
                f"cannot read the source of @jit function '{pyfn.__name__}' ({e}); @jit functions "
                "must be defined in a file or by exec/compile of a string") from None
    all_lines = text.splitlines(keepends=True)
    first_line = code.co_firstlineno
    return inspect.getblock(all_lines[first_line - 1:]), first_line, exec_sources.register_lines(
        pyfn.__name__, all_lines)


def get_source(pyfn: Callable, text: Optional[str] = None) -> FunctionSource:
    """Capture and parse the source of `pyfn` (cached per code object and source text);
    `text`, when given, replaces the function's source (`JITFunction._unsafe_update_src`)
    and is read with the function's globals and closure."""
    code = getattr(pyfn, "__code__", None)
    if code is None:
        raise SourceUnavailableError(f"'{getattr(pyfn, '__name__', pyfn)}' is not a Python function")
    if text is not None:
        raw_lines = text.splitlines(keepends=True)
        first_line, file = 1, exec_sources.register_lines(pyfn.__name__, raw_lines)
    else:
        raw_lines, first_line, file = source_lines(pyfn)
    parsed = _parse(tuple(raw_lines), pyfn.__name__)
    closure = {}
    if code.co_freevars and getattr(pyfn, "__closure__", None):
        for name, cell in zip(code.co_freevars, pyfn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:  # an empty cell: the closed-over name is not assigned yet
                pass
    tree, lines, indents = parsed
    if not file.startswith("<"):
        file = os.path.abspath(file)
    return FunctionSource(pyfn.__name__, file, max(first_line, 1), tree,
                          lines, indents, pyfn.__globals__, closure)


@functools.lru_cache(maxsize=512)
def _parse(raw_lines: tuple[str, ...], name: str) -> tuple[ast.FunctionDef, tuple[str, ...], tuple[int, ...]]:
    text = "".join(raw_lines)
    dedented = textwrap.dedent(text)
    lines = tuple(dedented.splitlines())
    originals = text.splitlines()
    # Per line, because dedent leaves blank lines alone and only strips the common prefix.
    indents = tuple(len(o) - len(d) for o, d in zip(originals, lines))
    module = python_ast.parse(dedented)
    defs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        raise SourceUnavailableError(f"the source of '{name}' does not contain a function definition")
    tree = defs[0]
    if isinstance(tree, ast.AsyncFunctionDef):
        raise SourceUnavailableError(f"'{name}' is an async function; @jit functions cannot be async")
    return tree, lines, indents
