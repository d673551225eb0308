"""Rules of the elementwise ops: arithmetic, comparisons, select, fma.

The numpy function of each op comes from the op table (`OP_INFO[op].numpy`), so the
interpreter and constant folding share one definition. What the rules add:
- results of bf16/fp8 type are rounded to nearest even after every op
  (`numpy_ops.round_to_type`); fma is rounded once for every type (`numpy_ops.fma`;
  bf16/fp8 through a float64 result rounded to odd);
- i1 arithmetic is arithmetic modulo 2 (add = xor, mul = and, neg = identity), as in
  LLVM, where numpy's bool arithmetic would be logical or / refuse;
- attributes reach the numpy function (`NanAttrs.propagate_nan` of maximum/minimum);
  `fdiv` with `ieee_rounding=False` is evaluated exactly: the approximate GPU division
  differs by at most 2 ulp, and the reference is the exact quotient;
- ops on pointer operands (comparisons, select) go through the fake address space.
Integer overflow wraps and float exceptions are silent: the launch runs under
`np.errstate(all="ignore")`.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ...ir import numpy_ops as npo
from ...ir.core import Instr
from ...ir.ops import COMPARISONS, OP_INFO, Op
from ...ir.types import PointerType, element_of
from .compiler import Compiler
from .memory import select_ptr
from .registry import MEMORY_SLOT, Step, rule
from .values import needs_rounding, storage_dtype

# Ops whose i1 form must be computed modulo 2 rather than with numpy's bool semantics.
_BOOL_VIA_U8 = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.ABS, Op.IDIV, Op.REM, Op.SHL,
                          Op.SHR, Op.MAXIMUM, Op.MINIMUM, Op.UMULHI})


def _bool_mod2(fn):
    def apply(*xs):
        r = fn(*(np.asarray(x).astype(np.uint8) for x in xs))
        return (np.asarray(r) & 1).astype(np.bool_)
    return apply


def _numpy_fn(ins: Instr):
    info = OP_INFO[ins.op]
    fn = info.numpy
    if ins.op in (Op.MAXIMUM, Op.MINIMUM) and ins.attrs is not None:
        fn = partial(fn, propagate_nan=ins.attrs.propagate_nan)
    operand_elem = element_of(ins.operands[-1].type)
    if getattr(operand_elem, "is_bool", False) and ins.op in _BOOL_VIA_U8:
        fn = _bool_mod2(fn)
    return fn


# Ops whose result is always one of their (already rounded) operands or an integer of
# smaller magnitude: no rounding to a narrow float type is needed after them.
_NO_NEW_VALUES = frozenset({Op.SELECT, Op.NEG, Op.ABS, Op.MAXIMUM, Op.MINIMUM, Op.CEIL, Op.FLOOR})


def _finish(fn, ins: Instr):
    """Wrap `fn` so its result has the storage dtype of the result type, rounded."""
    out_t = element_of(ins.result.type)
    dt = storage_dtype(out_t)
    if needs_rounding(out_t) and ins.op not in _NO_NEW_VALUES:
        if ins.op is Op.FMA:
            # rounded to odd in float64, so rounding to the narrow type is the only
            # rounding of the exact a*b + c (bf16/fp8 products are exact in float64)
            fn = npo.fma_round_to_odd
        return lambda *xs: npo.round_to_type(fn(*xs), out_t).astype(np.float32)

    def fix(*xs):
        r = fn(*xs)
        return r if r.dtype == dt else r.astype(dt)

    return fix


def _make_step(fn, ins_slots: tuple[int, ...], o: int) -> Step:
    # Specialized by arity: this is the hottest code of the interpreter.
    if len(ins_slots) == 1:
        (a,) = ins_slots

        def step1(env):
            env[o] = fn(env[a])
        return step1
    if len(ins_slots) == 2:
        a, b = ins_slots

        def step2(env):
            env[o] = fn(env[a], env[b])
        return step2
    a, b, c = ins_slots

    def step3(env):
        env[o] = fn(env[a], env[b], env[c])
    return step3


def _pointer_compare(ins: Instr, c: Compiler) -> Step:
    fn = OP_INFO[ins.op].numpy
    a, b = c.slots(ins.operands)
    o = c.slot(ins.result)

    def step(env):
        mem = env[MEMORY_SLOT]
        env[o] = np.asarray(fn(mem.address(env[a]), mem.address(env[b])))[()]
    return step


def _pointer_select(ins: Instr, c: Compiler) -> Step:
    s, a, b = c.slots(ins.operands)
    o = c.slot(ins.result)

    def step(env):
        env[o] = select_ptr(env[MEMORY_SLOT], env[s], env[a], env[b])
    return step


@rule(Op.NEG, Op.NOT, Op.ABS, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SIN, Op.COS, Op.SQRT,
      Op.SQRT_RN, Op.RSQRT, Op.ERF, Op.CEIL, Op.FLOOR,
      Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FDIV, Op.IDIV, Op.REM, Op.AND, Op.OR, Op.XOR,
      Op.SHL, Op.SHR, Op.MAXIMUM, Op.MINIMUM, Op.UMULHI,
      Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.FMA, Op.SELECT)
def elementwise(ins: Instr, c: Compiler) -> Step:
    pointer_operands = any(isinstance(element_of(v.type), PointerType) for v in ins.operands)
    if pointer_operands:
        if ins.op in COMPARISONS:
            return _pointer_compare(ins, c)
        if ins.op is Op.SELECT:
            return _pointer_select(ins, c)
        raise NotImplementedError(f"'{ins.op.value}' on pointer operands")
    fn = _finish(_numpy_fn(ins), ins)
    return _make_step(fn, c.slots(ins.operands), c.slot(ins.result))
