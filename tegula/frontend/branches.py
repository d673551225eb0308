"""`if` statements and conditional expressions, and the value plumbing that all
structured control flow shares (carrying tensors and tuples of tensors through region
results, yields and block arguments).

- A constexpr condition compiles only the taken branch (its statements are spliced
  into the enclosing list by `visit_block`).
- A tensor condition becomes an `if` instruction. Both branches are generated into
  their own regions from copies of the scope; a variable whose value differs between
  the two paths becomes a result of the `if`, and must have the same type on both.
  A name defined on one path only is not visible afterwards.
- An `if` on a tensor condition that contains a `return` takes the statements after
  it into both branches; the function's return value is then merged like a variable.
  A path that ends without returning a value, where the other returns one, returns an
  undefined value of the same type (Triton's poison; `Semantic.undefined`: zeros).
"""
from __future__ import annotations

import ast
from types import ModuleType
from typing import Any, Optional, Sequence

from ..ir.core import Block
from ..ir.ops import Op
from .diagnostics import FrontendError
from .scan import contains_return
from .scope import RETURN_SLOT, Scope
from .values import (
    describe,
    ir_type,
    is_aggregate,
    is_dtype,
    is_jit,
    is_number,
    is_tensor,
    is_value_tuple,
    same_structure,
    static_equal,
    unflatten,
    unwrap,
)


class BranchesMixin:
    """`if` / `x if c else y` code generation (mixed into FunctionGenerator)."""

    # ------------------------------------------------------------------ if statements
    def visit_if(self, node: ast.If, rest: list[ast.stmt]) -> Optional[list[ast.stmt]]:
        """Generate an `if`; return the statements still to generate after it (None when
        they were taken into its branches)."""
        cond = self.visit(node.test)
        if not is_tensor(cond):
            taken = node.body if self.static_truth(cond, "an `if`") else node.orelse
            return list(taken) + rest
        if contains_return(node):
            self.tensor_if(node, cond, list(node.body) + rest, list(node.orelse) + rest, returns=True)
            return None
        self.tensor_if(node, cond, node.body, node.orelse, returns=False)
        return rest

    def static_truth(self, cond: Any, where: str) -> bool:
        value = unwrap(cond)
        if is_dtype(value) or is_jit(value) or isinstance(value, ModuleType) or callable(value):
            raise FrontendError(f"the condition of {where} must be a tensor or a constexpr bool, int or "
                                f"None, not a {describe(cond)}")
        return bool(value)

    def condition(self, cond: Any) -> Any:
        """A scalar i1 tensor for a branch or loop condition (the language layer checks
        that a tensor condition is a scalar and converts it)."""
        if not is_tensor(cond):
            cond = bool(unwrap(cond))
        return self.sem.bool_condition(cond)

    def tensor_if(self, node: ast.If, cond: Any, then_stmts: Sequence[ast.stmt],
                  else_stmts: Sequence[ast.stmt], returns: bool) -> None:
        c = self.condition(cond)
        pre = self.scope
        then_block, else_block = Block(), Block()
        then_scope = self._generate_branch(then_block, then_stmts, pre)
        else_scope = self._generate_branch(else_block, else_stmts, pre)
        merged = pre.copy()
        pairs: list[tuple[str, Any, Any]] = []
        if returns:
            pairs = self._merge_returns(then_scope, else_scope, merged, then_block, else_block)
        else:
            pairs = self._merge_names(node, pre, then_scope, else_scope, merged)
        values = self.emit_branch_results(
            c, then_block, else_block, [(t, e) for _, t, e in pairs],
            lambda i, tv, ev: self._mismatch_message(pairs[i][0], pre, then_scope, else_scope, tv, ev))
        for (name, _, _), value in zip(pairs, values):
            loc = then_scope.def_locs.get(name) or else_scope.def_locs.get(name)
            merged.set(name, value, loc)
        self.scope = merged

    def _generate_branch(self, block: Block, stmts: Sequence[ast.stmt], pre: Scope) -> Scope:
        self.scope = pre.copy()
        try:
            with self.builder.at_end_of(block):
                self.visit_block(stmts)
            return self.scope
        finally:
            self.scope = pre

    def _merge_names(self, node: ast.If, pre: Scope, then_scope: Scope, else_scope: Scope,
                     merged: Scope) -> list[tuple[str, Any, Any]]:
        pairs = []
        names = dict.fromkeys([*then_scope.vars, *else_scope.vars])
        for name in names:
            in_then, in_else = name in then_scope.vars, name in else_scope.vars
            if not (in_then and in_else):
                branch = "then" if in_then else "else"
                merged.remove(name, f"it is only assigned in the {branch}-branch of the `if` at line "
                                    f"{self.line_of(node)}, so it is not defined after it")
                continue
            tv, ev = then_scope.vars[name], else_scope.vars[name]
            if tv is ev or static_equal(tv, ev):
                merged.set(name, tv, then_scope.def_locs.get(name))
                continue
            pairs.append((name, tv, ev))
        for dropped in (then_scope.dropped, else_scope.dropped):
            for name, why in dropped.items():
                if name not in merged.vars:
                    merged.dropped.setdefault(name, why)
        return pairs

    def _merge_returns(self, then_scope: Scope, else_scope: Scope, merged: Scope,
                       then_block: Block, else_block: Block) -> list[tuple[str, Any, Any]]:
        tv, ev = then_scope.get(RETURN_SLOT), else_scope.get(RETURN_SLOT)
        t_none, e_none = unwrap(tv) is None, unwrap(ev) is None
        if t_none and e_none:
            return []
        if t_none:
            tv = self._undefined_like(ev, else_block, then_block)
        elif e_none:
            ev = self._undefined_like(tv, then_block, else_block)
        if static_equal(tv, ev):
            merged.set(RETURN_SLOT, tv)
            return []
        return [(RETURN_SLOT, tv, ev)]

    def _undefined_like(self, value: Any, value_block: Block, block: Block) -> Any:
        """An undefined value made in `block` with the types and structure of `value`
        (returned in `value_block`): what a path that returns nothing gives, as in Triton,
        where it is poison. Only tensors, numbers and tuples of them have one (not
        strings or dtypes, nor block pointers and descriptors, whose static parts an
        undefined value could not have)."""

        def undefinable(v: Any) -> bool:
            return all(undefinable(x) for x in v) if is_value_tuple(v) else is_tensor(v) or is_number(v)

        with self.builder.at_end_of(value_block):
            leaves = self.carry_leaves(value) if undefinable(value) else None
        if leaves is None:
            raise FrontendError(f"'{self.src.name}' returns {describe(value)} on some paths and nothing on "
                                "others; only tensors, numbers and tuples of them can be left undefined")
        with self.builder.at_end_of(block):
            undefined = [self.sem.undefined(x.type) for x in leaves]
        return unflatten(value, iter(undefined)) if not is_number(value) else undefined[0]

    def _mismatch_message(self, name: str, pre: Scope, then_scope: Scope, else_scope: Scope,
                          tv: Any, ev: Any) -> str:
        # Each message starts with Triton's words for the mismatch (code matches on them).
        if name == RETURN_SLOT:
            return (f"Inconsistent return types: '{self.src.name}' returns {describe(tv)} on one path and "
                    f"{describe(ev)} on another; all its return values must have the same type")

        def side(scope: Scope, value: Any, branch: str) -> str:
            if name in pre.vars and scope.vars[name] is pre.vars[name]:
                return f"{describe(value)} before the `if` (unchanged by the {branch}-branch)"
            return f"{describe(value)} in the {branch}-branch"

        return (f"Mismatched type for {name}: {side(then_scope, tv, 'then')} but {side(else_scope, ev, 'else')}; "
                "a variable assigned under a tensor condition must have the same type on both paths")

    # ------------------------------------------------------------------ shared plumbing
    def carry_leaves(self, value: Any) -> Optional[list[Any]]:
        """The tensors that carry `value` through a region boundary (numbers become
        tensors here, at the insertion point), or None when it cannot be carried."""
        if is_value_tuple(value):
            leaves: list[Any] = []
            for v in value:
                sub = self.carry_leaves(v)
                if sub is None:
                    return None
                leaves.extend(sub)
            return leaves
        if is_tensor(value):
            return [value]
        if is_aggregate(value):
            return list(value.leaves())
        if is_number(value):
            return [self.sem.to_tensor(unwrap(value))]
        return None

    def emit_branch_results(self, cond: Any, then_block: Block, else_block: Block,
                            pairs: Sequence[tuple[Any, Any]], mismatch) -> list[Any]:
        """Yield each (then value, else value) pair from its block, create the `if`
        instruction and return the merged values (tuples rebuilt)."""
        then_leaves: list[Any] = []
        else_leaves: list[Any] = []
        for i, (tv, ev) in enumerate(pairs):
            with self.builder.at_end_of(then_block):
                t = self.carry_leaves(tv)
            with self.builder.at_end_of(else_block):
                e = self.carry_leaves(ev)
            if (t is None or e is None or not same_structure(tv, ev)
                    or [ir_type(x) for x in t] != [ir_type(x) for x in e]):
                raise FrontendError(mismatch(i, tv, ev))
            then_leaves.extend(t)
            else_leaves.extend(e)
        with self.builder.at_end_of(then_block):
            self.builder.yield_([x.handle for x in then_leaves])
        with self.builder.at_end_of(else_block):
            self.builder.yield_([x.handle for x in else_leaves])
        ins = self.builder.create(Op.IF, [cond.handle], result_types=[ir_type(x) for x in then_leaves],
                                  regions=[then_block, else_block])
        results = iter([self.sem.wrap(r) for r in ins.results])
        return [unflatten(tv, results) for tv, _ in pairs]

    # ------------------------------------------------------------------ conditional expressions
    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if not is_tensor(cond):
            taken = node.body if self.static_truth(cond, "a conditional expression") else node.orelse
            return self.visit(taken)
        c = self.condition(cond)
        then_block, else_block = Block(), Block()
        with self.builder.at_end_of(then_block):
            tv = self.visit(node.body)
        with self.builder.at_end_of(else_block):
            ev = self.visit(node.orelse)
        if unwrap(tv) is None and unwrap(ev) is None:
            self.emit_branch_results(c, then_block, else_block, [], None)
            return None
        return self.emit_branch_results(
            c, then_block, else_block, [(tv, ev)],
            lambda _i, a, b: f"Ternary expression with dynamic condition has inconsistent types {describe(a)} "
                             f"and {describe(b)}: the two values of a conditional expression on a tensor "
                             "condition must have the same type")[0]

