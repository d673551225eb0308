"""Rules of structured control flow: for, if, while and their terminators.

Region conventions are those of `ir.core`. A loop runs as a Python loop whose body is
one call of `run_steps` over the compiled region (each body step is itself
vectorized over its tile). Iteration values are read from the terminator's slots
before any block argument is written, so `yield %b, %a` swaps correctly.

- `for lb, ub, step`: the induction variable takes lb, lb + step, ... while it is
  below ub (above ub for a negative step), with Python integers, so no bound can
  overflow; a zero step is an error (the GPU would spin forever).
- `yield` / `condition` produce no step: the enclosing op reads their operands.
- `return` at the end of the kernel body ends the program; one nested in a region
  raises `ProgramExit`, which ends the current program instance only.
"""
from __future__ import annotations

from ...errors import KernelRuntimeError
from ...ir.accessors import for_bounds, for_inits
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import element_of
from .compiler import Compiler, ProgramExit, run_steps, source_loc
from .registry import PID_TUPLE_SLOT, Step, rule
from .values import storage_dtype


@rule(Op.FOR)
def for_loop(ins: Instr, c: Compiler) -> Step:
    lb, ub, st = c.slots(list(for_bounds(ins)))
    inits = c.slots(for_inits(ins))
    outs = c.slots(ins.results)
    body = c.block(ins.regions[0])
    iv_slot, iter_slots = body.arg_slots[0], body.arg_slots[1:]
    yields, steps = body.term_slots, body.steps
    iv_type = storage_dtype(element_of(ins.operands[0].type)).type

    def step(env):
        lo, hi, inc = int(env[lb]), int(env[ub]), int(env[st])
        if inc == 0:
            raise KernelRuntimeError("for loop with a step of 0", loc=source_loc(ins),
                                     pid=env[PID_TUPLE_SLOT])
        vals = [env[s] for s in inits]
        for i in range(lo, hi, inc):
            env[iv_slot] = iv_type(i)
            for s, v in zip(iter_slots, vals):
                env[s] = v
            run_steps(steps, env)
            vals = [env[s] for s in yields]
        for s, v in zip(outs, vals):
            env[s] = v
    return step


@rule(Op.IF)
def if_op(ins: Instr, c: Compiler) -> Step:
    cond = c.slot(ins.operands[0])
    outs = c.slots(ins.results)
    then_blk = c.block(ins.regions[0])
    else_blk = c.block(ins.regions[1]) if len(ins.regions) > 1 else None

    def step(env):
        blk = then_blk if env[cond] else else_blk
        if blk is None:
            return
        run_steps(blk.steps, env)
        if outs:
            vals = [env[s] for s in blk.term_slots]
            for s, v in zip(outs, vals):
                env[s] = v
    return step


@rule(Op.WHILE)
def while_loop(ins: Instr, c: Compiler) -> Step:
    inits = c.slots(ins.operands)
    outs = c.slots(ins.results)
    before = c.block(ins.regions[0])
    after = c.block(ins.regions[1])
    cond_slot, carried = before.term_slots[0], before.term_slots[1:]

    def step(env):
        vals = [env[s] for s in inits]
        while True:
            for s, v in zip(before.arg_slots, vals):
                env[s] = v
            run_steps(before.steps, env)
            vals = [env[s] for s in carried]
            if not env[cond_slot]:
                break
            for s, v in zip(after.arg_slots, vals):
                env[s] = v
            run_steps(after.steps, env)
            vals = [env[s] for s in after.term_slots]
        for s, v in zip(outs, vals):
            env[s] = v
    return step


@rule(Op.YIELD, Op.CONDITION)
def terminator(ins: Instr, c: Compiler) -> Step:
    """Terminators are read by the enclosing op (`Compiler.block`); no step."""
    return None


@rule(Op.RETURN)
def return_op(ins: Instr, c: Compiler) -> Step:
    def step(env):
        raise ProgramExit()
    return step
