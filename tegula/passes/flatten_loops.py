"""flatten_loops: a loop nest asked to flatten (`tl.range(..., flatten=True)`) becomes
one loop over the inner iterations of every outer iteration, so a software pipeline
built on it crosses the outer iterations (a persistent matmul's next tile's first
loads are in flight while the current tile's last dots and its epilogue run).

Expects: verified IR. Guarantees: verified IR with the same behaviour. A `for` whose
attributes ask for flattening, whose step is known positive, and whose body holds
exactly one `for` at its top level with bounds defined outside the nest and a known
positive step, and, before it, pure region-free instructions that load nothing (the
*prologue*, recomputed each flat iteration), becomes:

    T_o, T_i = the trip counts of the outer and the inner loop (both >= 0)
    for it in range(0, T_o * T_i):          64-bit; carries: outer values, inner values, c
        j_o = it / T_i, j_i = it - j_o * T_i
        outer iv = lb_o + j_o * st_o; inner iv = lb_i + j_i * st_i
        prologue
        each inner carried value = select(c == 0, its initial value, the carried one)
        inner body
        outer values = if c == T_i - 1 { epilogue (the rest of the outer body) } else { as carried }
        c = (c == T_i - 1) ? 0 : c + 1       (c: j_i counted, carried from 0)
    if T_i == 0: the outer loop with the prologue and the epilogue only (the inner
        loop's results being its initial values)

The division-based j_i feeds the address code, which the pipeliner computes iterations
ahead; the counted one the first/last tests, so no division stands between an
iteration's copies landing and its dot. The flat loop takes the hints of both loops
(the outer loop's first: its `num_stages`, `warp_specialize`) and keeps `flatten`,
which the CUDA backend reads as "a flattened nest"
(`warp_specialize.wants_specialization`). Nests that do not fit are left as they are,
without the hint: flattening is a schedule hint, never a change of meaning.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from ..ir import attrs as A
from ..ir.builder import Builder
from ..ir.clone import clone_instr
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import Op
from ..ir.types import I64, PointerType, ScalarType, TileType, element_of, shape_of
from .ir_utils import constant_of, defined_inside, is_movable_pure


def flatten_loops(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Flatten, in place, every loop nest of `kernel` whose outer loop asks for it."""
    _visit(kernel.body)
    return kernel


def _visit(block: Block) -> None:
    index = 0
    while index < len(block.instrs):
        ins = block.instrs[index]
        if ins.op is Op.FOR and isinstance(ins.attrs, A.LoopAttrs) and ins.attrs.flatten:
            replacement = _flatten(ins)
            if replacement is not None:
                block.instrs[index:index + 1] = replacement
                index += len(replacement)
                continue
            # a nest that does not fit drops the hint: `flatten` on a loop after this
            # pass names a flat loop only, as the CUDA backend reads it (its automatic
            # warp specialization, pipeline_memo's division of the flat index)
            ins.attrs = replace(ins.attrs, flatten=False)
        for region in ins.regions:
            _visit(region)
        index += 1


def _known_positive(v: Value) -> bool:
    c = constant_of(v)
    if c is not None:
        return c > 0
    return isinstance(v.owner, Instr) and v.owner.op is Op.NUM_PROGRAMS


def _split_body(outer: Instr) -> Optional[tuple[list[Instr], Instr, list[Instr]]]:
    """(prologue, the inner loop, epilogue) of a flattenable outer body, else None."""
    body = outer.regions[0].instrs[:-1]  # without the yield
    loops = [i for i, ins in enumerate(body) if ins.op is Op.FOR]
    if len(loops) != 1:
        return None
    inner = body[loops[0]]
    prologue, epilogue = body[:loops[0]], body[loops[0] + 1:]
    if not all(is_movable_pure(ins) for ins in prologue):
        return None
    inside = defined_inside(outer)
    if any(v in inside for v in inner.operands[:3]) or not _known_positive(inner.operands[2]):
        return None
    if not all(isinstance(r.type, (ScalarType, TileType)) for r in inner.results):
        return None
    return prologue, inner, epilogue


def _merged_attrs(outer: Instr, inner: Instr) -> A.LoopAttrs:
    o = outer.attrs
    i = inner.attrs if isinstance(inner.attrs, A.LoopAttrs) else A.LoopAttrs()
    return A.LoopAttrs(
        num_stages=o.num_stages if o.num_stages is not None else i.num_stages,
        loop_unroll_factor=None,
        warp_specialize=o.warp_specialize or i.warp_specialize,
        flatten=True,  # names the flat loop of a nest (its body holds no loop to flatten)
        disallow_acc_multi_buffer=o.disallow_acc_multi_buffer or i.disallow_acc_multi_buffer,
        disable_licm=o.disable_licm or i.disable_licm)


class _Emit:
    """A `Builder` over a list of instructions, with the scalar arithmetic the flat
    loop's counters need."""

    def __init__(self, block: Block, loc):
        self.b = Builder(block)
        self.b.loc = loc

    def const(self, value: int, t: ScalarType) -> Value:
        return self.b.constant(value, t)

    def op(self, op: Op, *operands: Value) -> Value:
        return self.b.op1(op, *operands)

    def trip_count(self, lb: Value, ub: Value, step: Value) -> Value:
        """max(0, ceil((ub - lb) / step)) for a positive step, without overflowing
        where ub - lb itself fits: (d - 1) / step + 1 when d > 0."""
        t = lb.type
        one, zero = self.const(1, t), self.const(0, t)
        d = self.op(Op.SUB, ub, lb)
        n = self.op(Op.ADD, self.op(Op.IDIV, self.op(Op.SUB, d, one), step), one)
        return self.op(Op.SELECT, self.op(Op.GT, d, zero), n, zero)


def _flatten(outer: Instr) -> Optional[list[Instr]]:
    lb_o, ub_o, st_o = outer.operands[:3]
    if not _known_positive(st_o):
        return None
    parts = _split_body(outer)
    if parts is None:
        return None
    prologue, inner, epilogue = parts
    t = lb_o.type
    if not isinstance(t, ScalarType) or not t.is_signed or not isinstance(inner.operands[0].type, ScalarType):
        return None
    lb_i, ub_i, st_i = inner.operands[:3]
    t_i = lb_i.type
    outer_body, inner_body = outer.regions[0], inner.regions[0]
    n_outer = len(outer.results)

    before = Block()
    e = _Emit(before, outer.loc)
    # the flat counter is 64-bit: T_o * T_i may pass 2**31 where both fit in 32 bits
    # (its divisions by T_i stay 32-bit where the values fit: LLVM's NVPTX backend
    # checks and bypasses the 64-bit division at run time)
    trips_o = e.b.cast(e.trip_count(lb_o, ub_o, st_o), I64)
    trips_i = e.b.cast(e.trip_count(lb_i, ub_i, st_i), I64)
    zero, one = e.const(0, I64), e.const(1, I64)
    has_inner = e.op(Op.GT, trips_i, zero)
    total = e.op(Op.MUL, trips_o, trips_i)
    last_i = e.op(Op.SUB, trips_i, one)

    # initial values of the inner carried values, for the flat loop's first iteration
    # (its select takes the prologue's value then; one defined in the prologue is
    # replaced there by a constant of its type)
    inner_inits = inner.operands[3:]
    inside = defined_inside(outer)
    flat_inits = list(outer.operands[3:])
    for v in inner_inits:
        if v not in inside:
            flat_inits.append(v)
        elif isinstance(v.type, (ScalarType, TileType)) and not isinstance(element_of(v.type), PointerType):
            flat_inits.append(e.b.constant(0, v.type))
        else:
            return None

    body = Block()
    it = body.add_arg(I64)
    carried = [body.add_arg(v.type) for v in flat_inits]
    step_i = body.add_arg(I64)  # c: the inner position, counted (see the module docstring)
    f = _Emit(body, outer.loc)
    j_o = f.op(Op.IDIV, it, trips_i)
    j_i = f.op(Op.SUB, it, f.op(Op.MUL, j_o, trips_i))
    mapping: dict[Value, Value] = {
        outer_body.args[0]: f.op(Op.ADD, lb_o, f.op(Op.MUL, f.b.cast(j_o, t), st_o)),
        inner_body.args[0]: f.op(Op.ADD, lb_i, f.op(Op.MUL, f.b.cast(j_i, t_i), st_i)),
    }
    mapping.update(zip(outer_body.args[1:], carried[:n_outer]))
    for ins in prologue:
        f.b.insert(clone_instr(ins, mapping))
    first = f.op(Op.EQ, step_i, zero)
    for arg, init, now in zip(inner_body.args[1:], inner_inits, carried[n_outer:]):
        cond = first if not isinstance(now.type, TileType) else f.b.splat(first, shape_of(now.type))
        mapping[arg] = f.op(Op.SELECT, cond, mapping.get(init, init), now)
    for ins in inner_body.instrs[:-1]:
        f.b.insert(clone_instr(ins, mapping))
    inner_next = [mapping.get(v, v) for v in inner_body.terminator.operands]

    # the epilogue, on the last inner iteration of each outer one
    mapping.update(zip(inner.results, inner_next))
    ends = _cloned(epilogue, mapping, outer_body.terminator.operands, outer.loc)
    keeps = Block(instrs=[Instr(Op.YIELD, carried[:n_outer], [], None, [], outer.loc)])
    is_last = f.op(Op.EQ, step_i, last_i)
    guard = f.b.create(Op.IF, [is_last], result_types=[v.type for v in carried[:n_outer]], regions=[ends, keeps])
    next_step = f.op(Op.SELECT, is_last, zero, f.op(Op.ADD, step_i, one))
    f.b.yield_([*guard.results, *inner_next, next_step])
    loop = Instr(Op.FOR, [zero, total, one, *flat_inits, zero], [Value(v.type) for v in [*flat_inits, zero]],
                 _merged_attrs(outer, inner), [body], outer.loc)
    before.instrs.append(loop)

    # an empty inner range: the outer loop runs its prologue and epilogue only, the
    # inner loop's results being its initial values
    nest_map: dict[Value, Value] = {}
    nest_prologue = [clone_instr(ins, nest_map) for ins in prologue]
    nest_map.update((r, nest_map.get(v, v)) for r, v in zip(inner.results, inner_inits))
    nest_rest = _cloned(epilogue, nest_map, outer_body.terminator.operands, outer.loc)
    nest = Block(args=list(outer_body.args), instrs=nest_prologue + nest_rest.instrs)
    plain = Instr(Op.FOR, list(outer.operands), [Value(r.type) for r in outer.results],
                  replace(outer.attrs, flatten=False), [nest], outer.loc)
    ran = Block(instrs=[Instr(Op.YIELD, loop.results[:n_outer], [], None, [], outer.loc)])
    empty = Block(instrs=[plain, Instr(Op.YIELD, plain.results, [], None, [], outer.loc)])
    # the outer loop's result values become the choice's: their uses stay as they are
    before.instrs.append(Instr(Op.IF, [has_inner], outer.results, None, [ran, empty], outer.loc))
    return before.instrs


def _cloned(instrs: list[Instr], mapping: dict[Value, Value], results: list[Value], loc) -> Block:
    """A block of copies of `instrs` (through `mapping`) yielding `results`' copies."""
    block = Block()
    for ins in instrs:
        block.instrs.append(clone_instr(ins, mapping))
    block.instrs.append(Instr(Op.YIELD, [mapping.get(v, v) for v in results], [], None, [], loc))
    return block
