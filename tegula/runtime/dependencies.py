"""A @jit function's source-level cache key: its own source (and its first line), the keys
of the @jit functions it calls (transitively) and the values of the constexpr globals
it reads.

The function's AST is scanned once for names that are not local (parameters, assigned
names, loop targets) and resolved against its globals and closure; attribute chains
(`mylib.helper`, `cfg.BLOCK`) are followed through modules and objects. What they
resolve to decides what enters the key:
- another @jit function: its own cache key (and `noinline`), recursively;
- a `constexpr_function`: the hash of its source;
- a `tl.constexpr`, a plain scalar/string, or a tl dtype: its name, type and value.
  These are also remembered as *used globals*, so a launch can notice that one was
  rebound after the kernel was compiled (Triton raises then; so do we).
Modules, builtins and ordinary Python functions are not part of the key.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import types
from dataclasses import dataclass
from typing import Any, Optional

from .. import python_ast

_SCALARS = (int, float, bool, str, bytes, type(None))


@dataclass(frozen=True)
class UsedGlobal:
    """A global (or closure) value a kernel read when its key was computed."""

    name: str
    namespace: dict  # the function's __globals__ (or a snapshot of its closure)
    value: Any

    def changed(self) -> bool:
        current = self.namespace.get(self.name, _MISSING)
        if current is self.value:
            return False
        try:
            return bool(current != self.value) or type(current) is not type(self.value)
        except Exception:  # values that refuse comparison: identity decides
            return True


_MISSING = object()


def _is_keyed_value(v: Any) -> bool:
    cls = type(v)
    if cls in _SCALARS:
        return True
    name, module = cls.__name__, cls.__module__
    if module.startswith(("tegula.language", "triton.language")):
        return name in ("constexpr", "dtype", "pointer_type", "block_type")
    return False


def _value_text(v: Any) -> str:
    if type(v).__name__ == "constexpr":
        v = getattr(v, "value", v)
        if getattr(v, "_tegula_jit", False):
            return "jit:" + v.cache_key
    return f"{type(v).__name__}:{v!r}"


class _NameCollector(ast.NodeVisitor):
    """Free names (loaded, never bound in the function) and attribute chains on them."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.loads: list[tuple[str, tuple[str, ...]]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        a = node.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
            self.bound.add(arg.arg)
        # Default values and annotations are evaluated in the enclosing scope, once.
        for stmt in node.body:
            self.visit(stmt)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loads.append((node.id, ()))
        else:
            self.bound.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain: list[str] = []
        cur: ast.AST = node
        while isinstance(cur, ast.Attribute):
            chain.append(cur.attr)
            cur = cur.value
        if isinstance(cur, ast.Name) and isinstance(node.ctx, ast.Load):
            self.loads.append((cur.id, tuple(reversed(chain))))
        else:
            self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self.bound.add(node.arg)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit_FunctionDef(node)  # type: ignore[arg-type]


def _closure_vars(fn: Any) -> dict[str, Any]:
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    out: dict[str, Any] = {}
    if code is None:
        return out
    for name, cell in zip(code.co_freevars, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def compute_cache_key(jitfn: Any) -> tuple[str, list[UsedGlobal]]:
    """(hex digest, used globals) of a JITFunction; see the module docstring."""
    src = jitfn.src
    hasher = hashlib.sha256(src.encode("utf-8"))
    # The line is in the key, the file is not (as in Triton): the same source written
    # to another path compiles to the same kernel. PyTorch Inductor's compile workers
    # load a kernel from one copy of its module and the parent from another; with the
    # path in the key the parent compiled every kernel again. Checked mode, whose
    # accesses report their file, keys on the file too (`ASTSource.source_file`).
    where = f"|line:{jitfn.starting_line_number}"
    hasher.update(f"{where}|noinline:{bool(jitfn.noinline)}".encode("utf-8", errors="backslashreplace"))
    tree = python_ast.parse(src)
    collector = _NameCollector()
    collector.visit(tree)
    fn = jitfn.fn
    globs: dict = fn.__globals__
    closure = _closure_vars(fn)
    used: list[UsedGlobal] = []
    parts: list[str] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for name, chain in collector.loads:
        if name in collector.bound or (name, chain) in seen:
            continue
        seen.add((name, chain))
        if name in closure:
            value, namespace = closure[name], closure
        elif name in globs:
            value, namespace = globs[name], globs
        else:
            continue  # a builtin, or a name the frontend will report as undefined
        if value is getattr(builtins, name, _MISSING):
            continue
        _key_value(name, value, namespace, chain, parts, used, top=True)
    for part in sorted(set(parts)):
        hasher.update(b"|")
        hasher.update(part.encode("utf-8", errors="backslashreplace"))
    return hasher.hexdigest(), used


def _key_value(path: str, value: Any, namespace: Optional[dict], chain: tuple[str, ...],
               parts: list[str], used: list[UsedGlobal], top: bool) -> None:
    if getattr(value, "_tegula_jit", False):
        parts.append(f"{path}=jit:{value.cache_key}:{bool(getattr(value, 'noinline', False))}")
        # A callee's globals matter to this kernel too: check them at its launches.
        used.extend(getattr(value, "used_globals", ()))
        return
    if getattr(value, "_tegula_constexpr_function", False):
        parts.append(f"{path}=constexpr_function:{value.cache_key}")
        return
    if _is_keyed_value(value):
        parts.append(f"{path}={_value_text(value)}")
        if top and namespace is not None:
            used.append(UsedGlobal(path, namespace, value))
        return
    if not chain:
        return
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return
    # Follow `module.attr` / `obj.attr`; modules of tegula itself hold builtins only.
    if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] in ("tegula", "triton"):
        return
    try:
        nxt = getattr(value, chain[0])
    except Exception:
        return
    _key_value(f"{path}.{chain[0]}", nxt, None, chain[1:], parts, used, top=False)
