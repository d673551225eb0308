"""Loops: `for` over `range` / `tl.range` (a `for` instruction), `tl.static_range`
(unrolled at compile time) and `while` (a `while` instruction).

Loop-carried variables are the names assigned in the body (found by `scan`, without
generating the body twice) that exist before the loop. Their values before the loop
are the initial values (numbers become scalar tensors), the body sees them as block
arguments, and their values at the end of the body are yielded; a body that changes
a carried variable's type is an error naming it and both types. Names first assigned
in the body are not visible after the loop. A constexpr-valued variable the body
reassigns must keep its value (a loop cannot change a compile-time value).

The induction variable is i32 unless a bound or the step is wider (Triton's integer
promotion). A negative constexpr step runs the loop upward over the mirrored range and
maps the induction variable back (`lb + ub - iv`), as Triton does; a step only known
at run time must be positive.
"""
from __future__ import annotations

import ast
import builtins
from typing import Any, Optional, Sequence

from ..ir.attrs import LoopAttrs
from ..ir.core import Block
from ..ir.ops import Op
from ..ir.types import ScalarType, TileType
from .diagnostics import FrontendError, unsupported
from .scan import assigned_names
from .scope import Scope
from .values import (
    constexpr,
    contains_tensor,
    describe,
    flatten,
    ir_type,
    is_tensor,
    language,
    same_structure,
    static_equal,
    unflatten,
    unwrap,
)

# tl.range's performance hints: constexprs kept on the `for` (`LoopAttrs`) for the
# backend's loop passes (num_stages drives the CUDA software pipeliner).
_RANGE_HINTS = ("num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
                "warp_specialize", "disable_licm")


class LoopsMixin:
    """`for` / `while` code generation (mixed into FunctionGenerator)."""

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise unsupported(node, "'for ... else'")
        if not isinstance(node.target, ast.Name):
            raise self.at(node.target, unsupported(node.target, "a for-loop target other than a single name"))
        it = node.iter
        if not isinstance(it, ast.Call):
            raise FrontendError("a for loop in a @jit function must iterate over range(...), tl.range(...) "
                                "or tl.static_range(...)")
        kind = unwrap(self.visit(it.func))
        tl = language()
        if kind is not builtins.range and kind is not tl.range and kind is not tl.static_range:
            raise FrontendError(f"a for loop in a @jit function must iterate over range(...), tl.range(...) "
                                f"or tl.static_range(...), not {describe(kind)}")
        args = []
        for a in it.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit_starred_items(a))
            else:
                args.append(self.visit(a))
        kwargs = {kw.arg: self.visit(kw.value) for kw in it.keywords if kw.arg is not None}
        if len(kwargs) != len(it.keywords):
            raise unsupported(it, "'**' argument unpacking")
        if kind is tl.static_range:
            start, end, step = _range_bounds(args, kwargs, "tl.static_range", ())
            self._static_for(node, start, end, step)
        else:
            name = "range" if kind is builtins.range else "tl.range"
            hints = _RANGE_HINTS if kind is tl.range else ()
            start, end, step = _range_bounds(args, kwargs, name, hints)
            self._scf_for(node, start, end, step, _loop_attrs(kwargs, hints))

    # ------------------------------------------------------------------ static_range
    def _static_for(self, node: ast.For, start: Any, end: Any, step: Any) -> None:
        if contains_tensor((start, end, step)):
            raise FrontendError("the bounds of tl.static_range must be constexprs, got "
                                f"({describe(start)}, {describe(end)}, {describe(step)})")
        name = node.target.id
        target_loc = self.src.loc(node.target)
        self.loop_depth += 1
        try:
            for i in range(unwrap(start), unwrap(end), unwrap(step)):
                self.scope.set(name, constexpr(i), target_loc)
                self.visit_block(node.body)
        finally:
            self.loop_depth -= 1

    # ------------------------------------------------------------------ for
    def _scf_for(self, node: ast.For, start: Any, end: Any, step: Any,
                 attrs: Optional[LoopAttrs] = None) -> None:
        step_value = unwrap(step)
        negative = False
        if not is_tensor(step):
            if not isinstance(step_value, int):
                raise FrontendError(f"the step of range() must be an integer, not a {describe(step)}")
            if step_value == 0:
                raise FrontendError("the step of range() must not be zero")
            if step_value < 0:
                negative = True
                start, end, step = end, start, constexpr(-step_value)
        lb, ub, st = (self._bound(v) for v in (start, end, step))
        types = [ir_type(lb), ir_type(ub), ir_type(st)]
        for t in types:
            if isinstance(t, TileType) or not isinstance(t, ScalarType) or not t.is_int:
                raise FrontendError("the bounds and step of a for loop must be integer scalars, got "
                                    f"({', '.join(str(x) for x in types)})")
        iv_type = _promote_int(_promote_int(types[0], types[1]), types[2])
        lb_h, ub_h, st_h = (self._cast_handle(v, iv_type) for v in (lb, ub, st))

        name = node.target.id
        pre = self.scope
        carried, inits, invariant = self._loop_carried(node.body, exclude=name)
        leaves = [leaf for v in inits for leaf in self.carry_leaves(v)]
        body = Block()
        iv = body.add_arg(iv_type)
        args = iter([self.sem.wrap(body.add_arg(ir_type(x))) for x in leaves])
        self.scope = pre.copy()
        for n, init in zip(carried, inits):
            self.scope.set(n, unflatten(init, args))
        with self.builder.at_end_of(body):
            if negative:
                # The loop runs over the mirrored range: map the induction variable back.
                iv = self.builder.op1(Op.ADD, self.builder.op1(Op.SUB, ub_h, iv), lb_h)
            self.scope.set(name, self.sem.wrap(iv), self.src.loc(node.target))
            body_scope = self._loop_body(node, carried, inits, invariant, pre)
        ins = self.builder.create(Op.FOR, [lb_h, ub_h, st_h, *(x.handle for x in leaves)], attrs=attrs,
                                  result_types=[ir_type(x) for x in leaves], regions=[body])
        self._after_loop(node, pre, body_scope, carried, inits, ins.results, target=name)

    def _bound(self, value: Any) -> Any:
        if is_tensor(value):
            return value
        v = unwrap(value)
        if not isinstance(v, int) or isinstance(v, bool):
            raise FrontendError(f"the bounds and step of a for loop must be integers, "
                                f"not a {describe(value)}")
        return self.sem.to_tensor(v)

    def _cast_handle(self, t: Any, to: ScalarType) -> Any:
        return t.handle if ir_type(t) == to else self.builder.cast(t.handle, to)

    # ------------------------------------------------------------------ while
    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise unsupported(node, "'while ... else'")
        pre = self.scope
        carried, inits, invariant = self._loop_carried(node.body, exclude=None)
        leaves = [leaf for v in inits for leaf in self.carry_leaves(v)]
        types = [ir_type(x) for x in leaves]
        before, after = Block(), Block()

        self.scope = pre.copy()
        before_args = iter([self.sem.wrap(before.add_arg(t)) for t in types])
        for n, init in zip(carried, inits):
            self.scope.set(n, unflatten(init, before_args))
        try:
            with self.builder.at_end_of(before):
                test = self.visit(node.test)
                if isinstance(test, language().condition):  # `while tl.condition(c, ...)`: hints only
                    test = test.condition
                cond = self.condition(test)
                self.builder.create(Op.CONDITION, [cond.handle, *before.args], result_types=[])
        finally:
            self.scope = pre

        self.scope = pre.copy()
        after_args = iter([self.sem.wrap(after.add_arg(t)) for t in types])
        for n, init in zip(carried, inits):
            self.scope.set(n, unflatten(init, after_args))
        with self.builder.at_end_of(after):
            body_scope = self._loop_body(node, carried, inits, invariant, pre)
        ins = self.builder.create(Op.WHILE, [x.handle for x in leaves], result_types=types,
                                  regions=[before, after])
        self._after_loop(node, pre, body_scope, carried, inits, ins.results, target=None)

    # ------------------------------------------------------------------ shared
    def _loop_carried(self, body: Sequence[ast.stmt], exclude: Any) -> tuple[list[str], list[Any], list[str]]:
        """(carried names, their initial values made carriable, names that must not change)."""
        carried, inits, invariant = [], [], []
        for name in assigned_names(body):
            if name == exclude or name not in self.scope:
                continue
            value = self.scope.vars[name]
            leaves = self.carry_leaves(value)
            if leaves is None:
                invariant.append(name)
                continue
            carried.append(name)
            inits.append(unflatten(value, iter(leaves)))
        return carried, inits, invariant

    def _loop_body(self, node: ast.stmt, carried: list[str], inits: list[Any], invariant: list[str],
                   pre: Scope) -> Scope:
        """Generate the body (in the current block and scope), check and yield the
        carried values; return the body's final scope and restore the pre-loop one."""
        self.loop_depth += 1
        try:
            self.visit_block(node.body)
            body_scope = self.scope
            finals: list[Any] = []
            for name, init in zip(carried, inits):
                value = body_scope.vars.get(name)
                leaves = self.carry_leaves(value)
                if (leaves is None or not same_structure(init, value)
                        or [ir_type(x) for x in leaves] != [ir_type(x) for x in flatten(init)]):
                    raise FrontendError(
                        f"loop-carried variable '{name}' is {describe(init)} before the loop but "
                        f"{describe(value)} at the end of the loop body; its type must stay the same "
                        "across iterations", body_scope.def_locs.get(name))
                finals.extend(leaves)
            for name in invariant:
                value = body_scope.vars.get(name)
                if not static_equal(value, pre.vars[name]):
                    raise FrontendError(
                        f"'{name}' is {describe(pre.vars[name])} before the loop and is reassigned inside it "
                        f"({describe(value)}); only tensors and numbers can change inside a loop",
                        body_scope.def_locs.get(name))
            self.builder.yield_([x.handle for x in finals])
            return body_scope
        finally:
            self.loop_depth -= 1
            self.scope = pre

    def _after_loop(self, node: ast.stmt, pre: Scope, body_scope: Scope, carried: list[str],
                    inits: list[Any], results: Sequence[Any], target: Any) -> None:
        merged = pre.copy()
        values = iter([self.sem.wrap(r) for r in results])
        for name, init in zip(carried, inits):
            merged.set(name, unflatten(init, values), body_scope.def_locs.get(name))
        line = self.line_of(node)
        for name in body_scope.vars:
            if name not in pre.vars and name != target:
                merged.remove(name, f"it is first assigned inside the loop at line {line}, so it is not "
                                    "defined after the loop")
        if target is not None and target not in pre.vars:
            merged.remove(target, f"it is the variable of the loop at line {line}, which is not defined "
                                  "after the loop")
        self.scope = merged


def _range_bounds(args: list[Any], kwargs: dict[str, Any], name: str,
                  hints: Sequence[str]) -> tuple[Any, Any, Any]:
    """(start, end, step) of `range`-like arguments (`arg1, arg2=None, step=None`)."""
    if len(args) > 3:
        raise FrontendError(f"{name}() takes at most 3 positional arguments ({len(args)} given)")
    slots = dict(zip(("arg1", "arg2", "step"), args))
    for key, value in kwargs.items():
        if key in hints:
            continue
        if name == "range" or key not in ("arg1", "arg2", "step"):
            raise FrontendError(f"{name}() got an unexpected keyword argument '{key}'")
        if key in slots:
            raise FrontendError(f"{name}() got multiple values for argument '{key}'")
        slots[key] = value
    if "arg1" not in slots:
        raise FrontendError(f"{name}() needs at least one argument")
    if unwrap(slots.get("arg2")) is None:
        start, end = constexpr(0), slots["arg1"]
    else:
        start, end = slots["arg1"], slots["arg2"]
    step = slots.get("step")
    return start, end, (constexpr(1) if unwrap(step) is None else step)


def _loop_attrs(kwargs: dict[str, Any], hints: Sequence[str]) -> Optional[LoopAttrs]:
    """tl.range's hints as the loop's attributes (None when none was given)."""
    given = {}
    for key in hints:
        if key not in kwargs:
            continue
        value = unwrap(kwargs[key])
        if is_tensor(kwargs[key]):
            raise FrontendError(f"tl.range's {key} must be a constexpr, got {describe(kwargs[key])}")
        if key in ("num_stages", "loop_unroll_factor"):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise FrontendError(f"tl.range's {key} must be a non-negative int, got {value!r}")
        else:
            value = bool(value)
        given[key] = value
    return LoopAttrs(**given) if given else None


def _promote_int(a: ScalarType, b: ScalarType) -> ScalarType:
    """Triton's integer promotion: the wider type; at equal width unsigned wins."""
    if a == b:
        return a
    if a.is_unsigned == b.is_unsigned:
        return a if a.bits > b.bits else b
    if a.is_unsigned:
        return a if a.bits >= b.bits else b
    return b if b.bits >= a.bits else a
