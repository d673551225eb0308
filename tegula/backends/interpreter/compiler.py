"""Compiles IR blocks into lists of steps (closures) over a slot environment.

The `Compiler` assigns each SSA value a slot in the environment list, asks each
instruction's rule for a step, and records what a block's terminator hands back
(`CompiledBlock.term_slots`). Values known at compile time (constants, aranges) get
slots pre-filled in the environment template; pure renames (program ids, hints)
share the slot of what they rename, so they cost nothing at run time.

`run_steps` is the one loop that executes steps. It turns an unexpected Python
exception inside a step into a `KernelRuntimeError` located at that step's
instruction (the original exception stays chained for tegula developers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ...errors import KernelRuntimeError, TegulaError
from ...ir.core import Block, Instr, Kernel, Loc, Value
from ...ir.ops import Op
from .registry import FIRST_FREE_SLOT, INTERPRETER_RULES, PID_TUPLE_SLOT, Env, Step


def source_loc(ins: Optional[Instr]) -> Optional[Loc]:
    """The instruction's source location for an error, None when it has none."""
    if ins is None or ins.loc is None or ins.loc.line <= 0:
        return None
    return ins.loc


class ProgramExit(Exception):
    """Raised by a `return` nested in a region: ends the current program instance."""


@dataclass(frozen=True)
class CompiledBlock:
    steps: tuple[Step, ...]
    arg_slots: tuple[int, ...]
    term_slots: tuple[int, ...]  # operands of the terminating yield / condition


def run_steps(steps: tuple[Step, ...], env: Env) -> None:
    """Execute `steps` in order (the interpreter's inner loop)."""
    step = None
    try:
        for step in steps:
            step(env)
    except (TegulaError, ProgramExit):
        raise
    except Exception as exc:
        ins: Instr = getattr(step, "instr", None)
        op = ins.op.value if ins is not None else "?"
        raise KernelRuntimeError(f"interpreter failure in '{op}': {type(exc).__name__}: {exc}",
                                 loc=source_loc(ins),
                                 pid=env[PID_TUPLE_SLOT]) from exc


class Compiler:
    """Compiles one kernel. Rules call `slot`, `alias`, `constant`, `block`."""

    def __init__(self, kernel: Kernel, debug: bool = False):
        self.kernel = kernel
        self.debug = debug
        self._slots: dict[int, int] = {}
        self.n_slots = FIRST_FREE_SLOT
        self.constants: dict[int, Any] = {}  # slot -> value, copied into every env

    # ---------------------------------------------------------------- slots
    def slot(self, v: Value) -> int:
        s = self._slots.get(id(v))
        if s is None:
            s = self._slots[id(v)] = self.n_slots
            self.n_slots += 1
        return s

    def slots(self, values: list[Value]) -> tuple[int, ...]:
        return tuple(self.slot(v) for v in values)

    def alias(self, v: Value, slot: int) -> None:
        """Make `v` live in `slot` (it must not have a slot yet)."""
        if id(v) in self._slots:
            raise RuntimeError(f"{v} already has a slot")
        self._slots[id(v)] = slot

    def constant(self, v: Value, value: Any) -> None:
        """`v` holds `value` in every program: pre-fill its slot, no step needed."""
        self.constants[self.slot(v)] = value

    # ---------------------------------------------------------------- blocks
    def block(self, block: Block, top_level: bool = False) -> CompiledBlock:
        arg_slots = self.slots(block.args)
        steps: list[Step] = []
        term_slots: tuple[int, ...] = ()
        for ins in block.instrs:
            if ins.op in (Op.YIELD, Op.CONDITION):
                # Read by the enclosing instruction's step, not executed.
                term_slots = self.slots(ins.operands)
                continue
            if ins.op is Op.RETURN and top_level and ins is block.instrs[-1]:
                continue  # the program simply ends
            fn = INTERPRETER_RULES.get(ins.op)
            if fn is None:
                raise NotImplementedError(f"the interpreter has no rule for '{ins.op.value}'")
            step = fn(ins, self)
            if step is not None:
                step.instr = ins  # for error messages (see run_steps)
                steps.append(step)
        return CompiledBlock(tuple(steps), arg_slots, term_slots)
