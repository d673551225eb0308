"""Cheap syntactic scans of statement lists, done before code is generated for them.

- `assigned_names`: the names a loop body may rebind. Names that exist before a loop
  and are assigned in its body are its loop-carried variables; finding them by a scan
  (instead of generating the body twice, as Triton does) keeps compile time linear.
- `contains_return`: whether an `if` hides a `return`, in which case the statements
  after it are moved into its branches so that control flow stays structured.
"""
from __future__ import annotations

import ast
import functools
from typing import Iterable


def assigned_names(stmts: Iterable[ast.stmt]) -> list[str]:
    """Names bound anywhere in `stmts` (nested blocks included), in first-binding order."""
    seen: dict[str, None] = {}
    for stmt in stmts:
        _scan_stmt(stmt, seen)
    return list(seen)


def _scan_stmt(stmt: ast.stmt, seen: dict[str, None]) -> None:
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            _scan_target(target, seen)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        if not (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
            _scan_target(stmt.target, seen)
    elif isinstance(stmt, ast.For):
        _scan_target(stmt.target, seen)
    # Bindings inside expressions (`:=`) are rejected when generated; not scanned here.
    for field in ("body", "orelse"):
        for child in getattr(stmt, field, None) or ():
            if isinstance(child, ast.stmt):
                _scan_stmt(child, seen)


def _scan_target(target: ast.expr, seen: dict[str, None]) -> None:
    if isinstance(target, ast.Name):
        seen.setdefault(target.id, None)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _scan_target(elt, seen)
    elif isinstance(target, ast.Starred):
        _scan_target(target.value, seen)


@functools.lru_cache(maxsize=4096)
def contains_return(node: ast.AST) -> bool:
    """Whether a `return` statement occurs anywhere inside `node`."""
    return any(isinstance(n, ast.Return) for n in ast.walk(node))
