"""Simple statements: assignments, expression statements, `assert`, `return`, `pass`.

Assignment follows Triton: a plain assignment of a compile-time number makes it a
(scalar) tensor, so `acc = 0` can be loop-carried and arithmetic on it is the
kernel's, not Python's; `X: tl.constexpr = 4` and `X = tl.constexpr(4)` keep a
compile-time value (an annotated tensor stays a tensor: Triton's wrapper unwraps).
Dtypes, None, strings, functions and modules stay what they are.
"""
from __future__ import annotations

import ast
from typing import Any

from .diagnostics import FrontendError, unsupported
from .scope import RETURN_SLOT
from .values import (
    constexpr,
    contains_tensor,
    describe,
    is_number,
    is_tensor,
    is_value_tuple,
    language,
    remake,
    unwrap,
)


class StatementsMixin:
    """visit_* methods for simple statements (mixed into FunctionGenerator)."""

    # ------------------------------------------------------------------ assignment
    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        keep_constexpr = self._is_constexpr_constructor(node.value)
        for target in node.targets:
            self.assign(target, value, keep_constexpr)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return  # a bare declaration binds nothing
        if self._is_constexpr_annotation(node.annotation):
            if not isinstance(node.target, ast.Name):
                raise FrontendError("only a plain name can be annotated tl.constexpr")
            value = self.visit(node.value)
            if contains_tensor(value):
                # Triton wraps the tensor in a constexpr that every tensor operation
                # unwraps, so the annotation changes nothing: `N: tl.constexpr = B * n`
                # with a runtime `n` runs there (FlagGems' radix sort). Bind the tensor;
                # a use that needs a compile-time value reports it where it is used.
                self.assign(node.target, value, False)
                return
            self.scope.set(node.target.id, constexpr(value), self.src.loc(node.target))
            return
        self.assign(node.target, self.visit(node.value), False)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise unsupported(node, "augmented assignment to an item or attribute")
        if isinstance(node.op, ast.MatMult):
            raise unsupported(node, "the '@=' operator (use tl.dot)")
        current = self.visit_with(node.target, lambda n: self.lookup(n.id))
        value = self.binary(type(node.op), current, self.visit(node.value))
        self.scope.set(node.target.id, self.sanitize(value), self.src.loc(node.target))

    def assign(self, target: ast.expr, value: Any, keep_constexpr: bool) -> None:
        if isinstance(target, ast.Name):
            bound = value if keep_constexpr else self.sanitize(value)
            self.scope.set(target.id, bound, self.src.loc(target))
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.visit_with(target, self._unpack, value, keep_constexpr)
        elif isinstance(target, ast.Subscript):
            raise self.at(target, unsupported(target, "item assignment (`x[i] = ...`)"))
        elif isinstance(target, ast.Attribute):
            raise self.at(target, unsupported(target, "attribute assignment"))
        else:
            raise self.at(target, unsupported(target, f"assigning to a {type(target).__name__}"))

    def _unpack(self, target: ast.Tuple, value: Any, keep_constexpr: bool) -> None:
        if any(isinstance(e, ast.Starred) for e in target.elts):
            raise unsupported(target, "starred assignment targets (`a, *b = ...`)", plural=True)
        if is_tensor(value):
            raise FrontendError(f"cannot unpack a tensor ({describe(value)}) into {len(target.elts)} names")
        items = value if is_value_tuple(value) else unwrap(value)
        if not isinstance(items, (tuple, list)):
            raise FrontendError(f"cannot unpack a {describe(value)} into {len(target.elts)} names")
        if len(items) != len(target.elts):
            raise FrontendError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
        for elt, item in zip(target.elts, items):
            self.assign(elt, item if is_value_tuple(value) else constexpr(item), keep_constexpr)

    def sanitize(self, value: Any) -> Any:
        """What a plain assignment binds: numbers become tensors (as in Triton)."""
        if is_value_tuple(value):
            return remake(value, [self.sanitize(v) for v in value])
        if is_number(value):
            return self.sem.to_tensor(unwrap(value))
        return value

    def _is_constexpr_annotation(self, annotation: ast.expr) -> bool:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            return annotation.value.split(".")[-1] == "constexpr"
        return self._resolve_static(annotation) is language().constexpr

    def _is_constexpr_constructor(self, value: ast.expr) -> bool:
        return isinstance(value, ast.Call) and self._resolve_static(value.func) is language().constexpr

    def _resolve_static(self, node: ast.expr) -> Any:
        """The object a `name` / `name.attr...` chain names, without generating code
        (None when it is not such a chain or does not resolve)."""
        if isinstance(node, ast.Name):
            if node.id in self.scope:
                return unwrap(self.scope.vars[node.id])
            try:
                return self.ns.lookup(node.id, self.scope)
            except FrontendError:
                return None
        if isinstance(node, ast.Attribute):
            base = self._resolve_static(node.value)
            if base is None or is_tensor(base):
                return None
            return getattr(base, node.attr, None)
        return None

    # ------------------------------------------------------------------ other statements
    def visit_Expr(self, node: ast.Expr) -> None:
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Return(self, node: ast.Return) -> None:
        if self.loop_depth:
            raise FrontendError("'return' inside a loop is not supported in @jit functions")
        value = self.visit(node.value) if node.value is not None else None
        self.scope.set(RETURN_SLOT, value, self.src.loc(node))

    def visit_Assert(self, node: ast.Assert) -> None:
        # As in Triton, `assert` is a device assertion and exists only in debug mode.
        if not self.ctx.debug:
            return
        cond = self.visit(node.test)
        if node.msg is not None:
            msg = self.visit(node.msg)
            if contains_tensor(msg):
                raise FrontendError("the message of an assert must be a constexpr string, not a tensor")
            message = str(unwrap(msg))
        else:
            message = ast.unparse(node.test)
        self.sem.device_assert(cond, message)
