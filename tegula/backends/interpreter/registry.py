"""The interpreter's rule table and the conventions every rule follows.

A *rule* compiles one instruction, once, into a *step*: a Python closure
`step(env) -> None` that reads its operands from and writes its results to `env`, a
list indexed by *slots* the compiler assigned to SSA values. Rules resolve everything
that does not depend on the data (dtypes, attributes, fast paths, nested regions)
when they run, so executing a program is a plain loop over closures.

A rule returns None when its instruction needs no runtime work (its results were
aliased or made constants at compile time, or it is a terminator read by the
enclosing block).

Slots 0..7 are reserved for the program being run (see the `*_SLOT` names).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ...ir.ops import Op

if TYPE_CHECKING:
    from ...ir.core import Instr
    from .compiler import Compiler

Env = list
Step = Callable[[Env], None]
Rule = Callable[["Instr", "Compiler"], Optional[Step]]

PID_SLOTS = (0, 1, 2)        # program id along x, y, z (numpy int32)
NPROG_SLOTS = (3, 4, 5)      # grid size along x, y, z (numpy int32)
PID_TUPLE_SLOT = 6           # (x, y, z) as Python ints, for error messages
MEMORY_SLOT = 7              # the launch's `Memory`
FIRST_FREE_SLOT = 8

INTERPRETER_RULES: dict[Op, Rule] = {}


def rule(*ops: Op) -> Callable[[Rule], Rule]:
    """Register `fn` as the interpreter rule of `ops`."""

    def register(fn: Rule) -> Rule:
        for op in ops:
            if op in INTERPRETER_RULES:
                raise RuntimeError(f"two interpreter rules for '{op.value}'")
            INTERPRETER_RULES[op] = fn
        return fn

    return register


def has_rule(op: Op) -> bool:
    return op in INTERPRETER_RULES
