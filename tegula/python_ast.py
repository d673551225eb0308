"""Python source to `ast` trees (and trees to code), safe to call from several threads.

CPython 3.11 converts between its internal AST and `ast` objects with a recursion depth
kept in interpreter-wide state; two threads converting at once can fail with
`SystemError: AST constructor recursion depth mismatch` (CPython gh-95185 / gh-106905).
The autotuner compiles configs in threads, each parsing the kernel's source, and about
one tuning in twenty lost a config that way on this project's CI machine (Python
3.11.7). Every parse of Python source and every compile of a tree in tegula goes
through these functions, under one lock; both are fast next to a kernel compile.
"""
from __future__ import annotations

import ast
import threading
from types import CodeType
from typing import Any

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """`ast.parse(source, filename, mode)` under the lock."""
    with _LOCK:
        return ast.parse(source, filename, mode)


def compile_tree(tree: ast.AST, filename: str, mode: str) -> CodeType:
    """`compile(tree, filename, mode)` of an `ast` tree under the lock."""
    with _LOCK:
        return compile(tree, filename, mode)
