"""Lowering of structured control flow to LLVM basic blocks with phis (one phi per
register of each carried tile): `for` (header with the trip test, body, latch), `if`
(then/else/merge), `while` (before/after/exit), `return`, plus the barrier and assume
meta ops. Conditions and bounds are scalars, hence uniform across the CTA, so barriers
inside regions are safe.

Checked (debug) mode reports what the interpreter reports: a `for` with a step of 0
(the loop is skipped instead of spinning) and a false `assume` (otherwise only an
optimisation hint), both as `DeviceAssertionError`s after the launch."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Block, Instr, Value
from ...ir.ops import Op
from ...ir.types import element_of
from .checked import KIND_ASSERT
from .registry import handles
from .warp_partitions import is_role_split, lower_role_split

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


def lower_region(lw: "KernelLowering", block: Block) -> Optional[list[list[ir.Value]]]:
    """Lower a region's body; return its terminator's operands (registers each), in
    the layouts the plan requires of them — or None for an `if` branch that ends the
    program with `return` (IR the verifier rejects, but the interpreter runs)."""
    for ins in block.instrs[:-1]:
        lw.lower_instr(ins)
    term = block.terminator
    if term.op is Op.RETURN:
        lw.lower_instr(term)
        return None
    lw.current = term
    return [lw.operand(term, k) for k in range(len(term.operands))]


def _yielded(lw: "KernelLowering", vals: Optional[list[list[ir.Value]]], what: str) -> list[list[ir.Value]]:
    if vals is None:
        raise CompilationError(f"a '{what}' region cannot end in 'return'", lw.loc())
    return vals


def _phis(b: ir.IRBuilder, regs_list: list[list[ir.Value]], pred: ir.Block) -> list[list[ir.PhiInstr]]:
    out = []
    for regs in regs_list:
        row = []
        for v in regs:
            p = b.phi(v.type)
            p.add_incoming(v, pred)
            row.append(p)
        out.append(row)
    return out


def _add_incoming(phis: list[list[ir.PhiInstr]], vals: list[list[ir.Value]], pred: ir.Block) -> None:
    for row, regs in zip(phis, vals):
        for p, v in zip(row, regs):
            p.add_incoming(v, pred)


def _constant_value(v: Value):
    ins = v.owner
    if isinstance(ins, Instr) and ins.op is Op.CONSTANT:
        return ins.attrs.value
    return None


@handles(Op.FOR)
def lower_for(lw: "KernelLowering", ins: Instr) -> None:
    b = lw.b
    lb, ub, step = (lw.scalar(ins.operands[i]) for i in range(3))
    n = len(ins.results)
    inits = [lw.operand(ins, 3 + k) for k in range(n)]
    body = ins.regions[0]
    fn = b.function
    header = fn.append_basic_block("for.header")
    body_bb = fn.append_basic_block("for.body")
    exit_bb = fn.append_basic_block("for.exit")
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type)
    iv.add_incoming(lb, pre)
    phis = _phis(b, inits, pre)
    signed = element_of(body.args[0].type).is_signed
    cmp = b.icmp_signed if signed else b.icmp_unsigned
    step_c = _constant_value(ins.operands[2])
    if step_c is not None and step_c < 0:
        cond = cmp(">", iv, ub)
    elif step_c is not None or not signed:
        cond = cmp("<", iv, ub)
    else:
        up = b.icmp_signed(">", step, ir.Constant(step.type, 0))
        cond = b.select(up, cmp("<", iv, ub), cmp(">", iv, ub))
    if lw.checked is not None and step_c is None:
        zero_step = b.icmp_unsigned("==", step, ir.Constant(step.type, 0))
        site = lw.checked.site("assert", ins.loc, "for loop with a step of 0")
        lw.checked.report(lw, KIND_ASSERT, site, zero_step)
        cond = b.and_(cond, b.not_(zero_step))
    b.cbranch(cond, body_bb, exit_bb)
    b.position_at_end(body_bb)
    lw.define(body.args[0], [iv])
    for k in range(n):
        lw.define(body.args[k + 1], phis[k])
    lw.loop_depth += 1
    lw.push_scope()
    yielded = _yielded(lw, lower_region(lw, body), "for")
    lw.pop_scope()
    lw.loop_depth -= 1
    nxt = b.add(iv, step)
    latch = b.block
    b.branch(header)
    iv.add_incoming(nxt, latch)
    _add_incoming(phis, yielded, latch)
    b.position_at_end(exit_bb)
    for k in range(n):
        lw.define(ins.results[k], phis[k])


@handles(Op.IF)
def lower_if(lw: "KernelLowering", ins: Instr) -> None:
    if is_role_split(ins):
        lower_role_split(lw, ins)
        return
    b = lw.b
    cond = lw.scalar(ins.operands[0])
    fn = b.function
    branches = [fn.append_basic_block("if.then"), fn.append_basic_block("if.else")]
    merge = fn.append_basic_block("if.end")
    b.cbranch(cond, branches[0], branches[1])
    ends = []
    for bb, region in zip(branches, ins.regions):
        b.position_at_end(bb)
        lw.push_scope()
        vals = lower_region(lw, region)
        lw.pop_scope()
        ends.append((b.block, vals))
        b.branch(merge)  # from the unreachable block after a `return` too
    b.position_at_end(merge)
    for k, res in enumerate(ins.results):
        first = next((vals[k] for _end, vals in ends if vals is not None), None)
        if first is None:
            raise CompilationError("an 'if' with results cannot return from both branches", lw.loc())
        row = [b.phi(v.type) for v in first]
        for end, vals in ends:
            for p, v, t in zip(row, vals[k] if vals is not None else first, first):
                p.add_incoming(v if vals is not None else ir.Constant(t.type, ir.Undefined), end)
        lw.define(res, row)


@handles(Op.WHILE)
def lower_while(lw: "KernelLowering", ins: Instr) -> None:
    b = lw.b
    before, after = ins.regions
    inits = [lw.operand(ins, k) for k in range(len(ins.operands))]
    fn = b.function
    before_bb = fn.append_basic_block("while.before")
    after_bb = fn.append_basic_block("while.after")
    exit_bb = fn.append_basic_block("while.exit")
    pre = b.block
    b.branch(before_bb)
    b.position_at_end(before_bb)
    phis = _phis(b, inits, pre)
    for a, row in zip(before.args, phis):
        lw.define(a, row)
    lw.loop_depth += 1
    lw.push_scope()
    vals = _yielded(lw, lower_region(lw, before), "while")
    lw.pop_scope()
    cond, carried = vals[0][0], vals[1:]
    b.cbranch(cond, after_bb, exit_bb)
    b.position_at_end(after_bb)
    for a, regs in zip(after.args, carried):
        lw.define(a, regs)
    lw.push_scope()
    yielded = _yielded(lw, lower_region(lw, after), "while")
    lw.pop_scope()
    lw.loop_depth -= 1
    latch = b.block
    b.branch(before_bb)
    _add_incoming(phis, yielded, latch)
    b.position_at_end(exit_bb)
    for res, regs in zip(ins.results, carried):
        lw.define(res, regs)


@handles(Op.RETURN)
def lower_return(lw: "KernelLowering", ins: Instr) -> None:
    b = lw.b
    b.ret_void()
    # anything after an early return is unreachable; keep a block to emit it into
    b.position_at_end(b.function.append_basic_block("after.return"))


@handles(Op.YIELD, Op.CONDITION)
def lower_terminator(lw: "KernelLowering", ins: Instr) -> None:
    """Terminators are read by their parent op (`lower_region`), never lowered alone."""
    raise AssertionError(f"stray {ins.op.value}")


@handles(Op.DEBUG_BARRIER)
def lower_barrier(lw: "KernelLowering", ins: Instr) -> None:
    lw.barrier()


@handles(Op.GDC_WAIT, Op.GDC_LAUNCH_DEPENDENTS)
def lower_grid_dependency_control(lw: "KernelLowering", ins: Instr) -> None:
    """`griddepcontrol.wait` / `.launch_dependents` (PTX 7.8, sm_90); below sm_90 there
    is no programmatic dependent launch and a grid starts after its predecessor ends."""
    if lw.capability >= 90:
        lw.dev.griddepcontrol(lw.b, "wait" if ins.op is Op.GDC_WAIT else "launch_dependents")


@handles(Op.ASSUME)
def lower_assume(lw: "KernelLowering", ins: Instr) -> None:
    t = lw.tile(ins.operands[0])
    if lw.checked is not None:
        b = lw.b
        fail = None
        for reg in t.regs:
            fail = b.not_(reg) if fail is None else b.or_(fail, b.not_(reg))
        site = lw.checked.site("assert", ins.loc, "assumption violated (tl.assume)")
        lw.checked.report(lw, KIND_ASSERT, site, fail)
        return
    if t.layout is None:
        lw.b.assume(t.regs[0])
