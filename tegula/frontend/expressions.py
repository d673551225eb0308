"""Expressions: names, literals, tuples, attributes, indexing, operators, f-strings.

The rule throughout: when a tensor is involved the operation is the tensor's (its
operators delegate to the language's Semantic, which owns promotion and broadcasting);
otherwise the operands are compile-time values and the operation is Python's own,
applied to the unwrapped values, whose result is wrapped back as a constexpr. So
`BLOCK // 2` on a constexpr is Python's floor division while `x // 2` on a tensor is
the C-style one, as in Triton.
"""
from __future__ import annotations

import ast
import operator
from typing import Any

from .diagnostics import FrontendError, unsupported
from .values import constexpr, contains_tensor, describe, is_constexpr, is_tensor, is_value_tuple, to_value, unwrap

# Binary operator → (method on the left operand, reflected method on the right, Python operator).
_BINARY: dict[type, tuple[str, str, Any, str]] = {
    ast.Add: ("__add__", "__radd__", operator.add, "+"),
    ast.Sub: ("__sub__", "__rsub__", operator.sub, "-"),
    ast.Mult: ("__mul__", "__rmul__", operator.mul, "*"),
    ast.Div: ("__truediv__", "__rtruediv__", operator.truediv, "/"),
    ast.FloorDiv: ("__floordiv__", "__rfloordiv__", operator.floordiv, "//"),
    ast.Mod: ("__mod__", "__rmod__", operator.mod, "%"),
    ast.Pow: ("__pow__", "__rpow__", operator.pow, "**"),
    ast.LShift: ("__lshift__", "__rlshift__", operator.lshift, "<<"),
    ast.RShift: ("__rshift__", "__rrshift__", operator.rshift, ">>"),
    ast.BitAnd: ("__and__", "__rand__", operator.and_, "&"),
    ast.BitOr: ("__or__", "__ror__", operator.or_, "|"),
    ast.BitXor: ("__xor__", "__rxor__", operator.xor, "^"),
}

_COMPARE: dict[type, tuple[str, str, Any, str]] = {
    ast.Eq: ("__eq__", "__eq__", operator.eq, "=="),
    ast.NotEq: ("__ne__", "__ne__", operator.ne, "!="),
    ast.Lt: ("__lt__", "__gt__", operator.lt, "<"),
    ast.LtE: ("__le__", "__ge__", operator.le, "<="),
    ast.Gt: ("__gt__", "__lt__", operator.gt, ">"),
    ast.GtE: ("__ge__", "__le__", operator.ge, ">="),
}

_UNARY: dict[type, tuple[str, Any]] = {
    ast.USub: ("__neg__", operator.neg),
    ast.UAdd: ("__pos__", operator.pos),
    ast.Invert: ("__invert__", operator.invert),
}


class ExpressionsMixin:
    """visit_* methods for expression nodes (mixed into FunctionGenerator)."""

    # ------------------------------------------------------------------ leaves
    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id)

    def visit_Constant(self, node: ast.Constant) -> Any:
        return constexpr(node.value)

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        items: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                items.extend(self.visit_starred_items(elt))
            else:
                items.append(self.visit(elt))
        return tuple(items)

    # Triton treats list displays as tuples (they are immutable inside kernels).
    visit_List = visit_Tuple

    def visit_starred_items(self, node: ast.Starred) -> tuple:
        value = self.visit(node.value)
        if type(value) is not tuple:
            value = unwrap(value)
            if not isinstance(value, (tuple, list)):
                raise FrontendError(f"only tuples can be unpacked with '*', not a {describe(value)}")
        return tuple(to_value(v) for v in value)

    def visit_ListComp(self, node: ast.ListComp) -> tuple:
        """`[f(x) for x in T]` over a compile-time sequence: a tuple, built by unrolling
        (Triton 3.6 supports exactly this form)."""
        if len(node.generators) != 1 or node.generators[0].ifs or node.generators[0].is_async:
            raise unsupported(node, "list comprehensions with several `for` or an `if`", plural=True)
        gen = node.generators[0]
        if _is_range_call(self, gen.iter):
            # range() in a comprehension would otherwise report "range() can only be the
            # iterator of a for loop", which names the wrong construct.
            raise self.at(gen.iter, FrontendError(
                f"list comprehensions in @jit functions can only iterate over a tuple (they are "
                f"unrolled at compile time), not over {ast.unparse(gen.iter)}; use a for loop "
                f"(`for {ast.unparse(gen.target)} in {ast.unparse(gen.iter)}:`), or "
                "tl.static_range(...) in the loop to unroll it"))
        iterable = self.visit(gen.iter)
        if is_tensor(iterable):
            raise FrontendError(f"a list comprehension cannot iterate over a tensor ({describe(iterable)})")
        items = iterable if is_value_tuple(iterable) else unwrap(iterable)
        if not isinstance(items, (tuple, list, range)):
            raise FrontendError(f"a list comprehension can only iterate over a tuple, "
                                f"not a {describe(iterable)}")
        outer = self.scope
        self.scope = outer.copy()  # the comprehension variable is local to it, as in Python
        try:
            results = []
            for item in items:
                self.assign(gen.target, to_value(item), keep_constexpr=True)
                results.append(self.visit(node.elt))
            return tuple(results)
        finally:
            self.scope = outer

    def visit_Starred(self, node: ast.Starred) -> Any:
        raise unsupported(node, "'*' unpacking here")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append(self.visit_with(value, self._format_value))
            else:  # pragma: no cover - the parser produces nothing else
                raise unsupported(value)
        return constexpr("".join(parts))

    def _format_value(self, node: ast.FormattedValue) -> str:
        value = self.visit(node.value)
        if contains_tensor(value):
            raise FrontendError(
                f"f-strings in @jit functions can only format constexpr values, not a tensor "
                f"({describe(value)}); use tl.device_print to print tensors")
        py = unwrap(value)
        if node.conversion == ord("r"):
            py = repr(py)
        elif node.conversion == ord("s"):
            py = str(py)
        elif node.conversion == ord("a"):
            py = ascii(py)
        spec = unwrap(self.visit(node.format_spec)) if node.format_spec is not None else ""
        return format(py, spec)

    # ------------------------------------------------------------------ attributes, indexing
    def visit_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.visit(node.value)
        if is_tensor(obj):
            # One getattr only: properties such as `.T` emit code.
            try:
                return getattr(obj, node.attr)
            except AttributeError:
                if hasattr(type(obj), node.attr):
                    raise
                raise FrontendError(f"tensor ({describe(obj)}) has no attribute '{node.attr}'") from None
        if node.attr == "value" and (is_constexpr(obj) or not hasattr(obj, "value")):
            # Triton holds every non-tensor value of a @jit function as a tl.constexpr,
            # whose `.value` is the value itself: `dtype.value` of a dtype argument
            # (FlagGems' get_dtype_max), `BLOCK.value` of a constexpr
            return obj
        target = unwrap(obj) if type(obj) is not tuple else obj
        try:
            return to_value(getattr(target, node.attr))
        except AttributeError:
            raise FrontendError(f"{describe(obj)} has no attribute '{node.attr}'") from None

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        obj = self.visit(node.value)
        index = self.visit(node.slice)
        if is_tensor(obj):
            return obj[_tensor_index(index)]
        if contains_tensor(index):
            raise FrontendError(f"a {describe(obj)} can only be indexed by constexprs, not by a tensor")
        target = obj if is_value_tuple(obj) else unwrap(obj)
        return to_value(target[unwrap(index)])

    def visit_Slice(self, node: ast.Slice) -> slice:
        parts = [None if n is None else self.visit(n) for n in (node.lower, node.upper, node.step)]
        for p in parts:
            if is_tensor(p):
                raise FrontendError("slice bounds must be constexprs, not tensors")
        return slice(*(unwrap(p) for p in parts))

    # ------------------------------------------------------------------ operators
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        if isinstance(node.op, ast.MatMult):
            raise unsupported(node, "the '@' operator (use tl.dot)")
        lhs = self.visit(node.left)
        rhs = self.visit(node.right)
        return self.binary(type(node.op), lhs, rhs)

    def binary(self, op: type, lhs: Any, rhs: Any) -> Any:
        """`lhs <op> rhs`: the tensor's operator when either is a tensor, else Python's."""
        method, reflected, py_op, symbol = _BINARY[op]
        return _apply(method, reflected, py_op, symbol, lhs, rhs)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            if is_tensor(operand):
                return self.sem.not_(operand)
            return constexpr(not unwrap(operand))
        method, py_op = _UNARY[type(node.op)]
        if is_tensor(operand):
            fn = getattr(operand, method, None)
            if fn is None:
                raise FrontendError(f"unary operator '{method}' is not supported on tensors")
            return fn()
        return to_value(py_op(unwrap(operand)))

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and` / `or`: Python's short-circuit semantics on compile-time values (the
        right side is not even generated when the left decides), logical ops on tensors."""
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if not is_tensor(result):
                if bool(unwrap(result)) != is_and:
                    return result
                result = self.visit(value_node)
                continue
            rhs = self.visit(value_node)
            result = self.sem.logical_and(result, rhs) if is_and else self.sem.logical_or(result, rhs)
        return result

    def visit_Compare(self, node: ast.Compare) -> Any:
        """Comparison chains `a < b < c` mean `(a < b) and (b < c)` with `b` evaluated once."""
        left = self.visit(node.left)
        result: Any = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            step = self.compare(op, left, right)
            # A compile-time `result` here is truthy (else we returned): Python's `and`
            # then yields the next comparison itself.
            result = self.sem.logical_and(result, step) if is_tensor(result) else step
            if not is_tensor(result) and not bool(unwrap(result)):
                return result
            left = right
        return result

    def compare(self, op: ast.cmpop, lhs: Any, rhs: Any) -> Any:
        if isinstance(op, (ast.Is, ast.IsNot)):
            same = unwrap(lhs) is unwrap(rhs)
            return constexpr(same if isinstance(op, ast.Is) else not same)
        if isinstance(op, (ast.In, ast.NotIn)):
            if contains_tensor(lhs) or is_tensor(rhs):
                raise FrontendError("'in' is only supported on constexpr values")
            found = unwrap(lhs) in unwrap(rhs)
            return constexpr(found if isinstance(op, ast.In) else not found)
        method, reflected, py_op, symbol = _COMPARE[type(op)]
        return _apply(method, reflected, py_op, symbol, lhs, rhs)


def _apply(method: str, reflected: str, py_op: Any, symbol: str, lhs: Any, rhs: Any) -> Any:
    if is_tensor(lhs):
        fn = getattr(lhs, method, None)
        result = fn(rhs) if fn is not None else NotImplemented
        if result is NotImplemented and is_tensor(rhs):
            fn = getattr(rhs, reflected, None)
            result = fn(lhs) if fn is not None else NotImplemented
        if result is NotImplemented:
            raise FrontendError(f"operator '{symbol}' is not supported between {describe(lhs)} "
                                f"and {describe(rhs)}")
        return result
    if is_tensor(rhs):
        fn = getattr(rhs, reflected, None)
        result = fn(lhs) if fn is not None else NotImplemented
        if result is NotImplemented:
            raise FrontendError(f"operator '{symbol}' is not supported between {describe(lhs)} "
                                f"and {describe(rhs)}")
        return result
    a, b = unwrap(lhs), unwrap(rhs)
    try:
        return to_value(py_op(a, b))
    except TypeError:
        if contains_tensor(a) or contains_tensor(b):
            raise FrontendError(f"operator '{symbol}' is not supported between {describe(lhs)} "
                                f"and {describe(rhs)}") from None
        raise


def _tensor_index(index: Any) -> Any:
    """An index for `tensor[...]`: constexprs unwrapped, tensors and slices kept."""
    if is_value_tuple(index):
        return tuple(_tensor_index(i) for i in index)
    if is_tensor(index):
        return index
    value = unwrap(index)
    if isinstance(value, tuple):
        return tuple(_tensor_index(i) for i in value)
    return value



def _is_range_call(gen: Any, node: ast.expr) -> bool:
    """Whether `node` calls range, tl.range or tl.static_range (resolved, not by name)."""
    if not isinstance(node, ast.Call):
        return False
    try:
        fn = unwrap(gen.visit(node.func))
    except Exception:
        return False  # visiting the iterator for real reports the problem
    from ..language import range as tl_range
    from ..language import static_range

    return fn is range or fn is tl_range or fn is static_range
