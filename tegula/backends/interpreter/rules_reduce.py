"""Rules of reduce and scan: the combine region evaluated on whole arrays.

The combine region is written for scalars (accumulated values, then new values), but
every elementwise rule is shape-agnostic, so one evaluation of the region combines
whole arrays of pairs at once:
- reduce: a tree over the axis, pairing *adjacent* elements (0 with 1, 2 with 3, ...)
  and halving each round; adjacent pairing keeps the left-to-right order of operands,
  so a combine function that is associative but not commutative still reduces
  correctly (odd lengths carry the last element to the next round);
- scan: Hillis–Steele, log2(n) rounds where element i combines with element i - d;
  `reverse` scans flip the axis before and after.
When the region is one recognised op on its two arguments (add, mul, max, min, and,
or, xor) on a type where numpy computes the same values, a numpy reduction or
accumulation is used instead: integer sums wrap in their own dtype like the GPU's;
f32/f64 sums use numpy's pairwise order (f16/bf16/fp8 keep the tree so that every
combine rounds to the narrow type, as the region says).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ...ir.core import Block, Instr
from ...ir.ops import Op
from ...ir.types import ScalarType, element_of, shape_of
from .compiler import CompiledBlock, Compiler, run_steps
from .registry import Step, rule
from .values import storage_dtype

_BITWISE = {Op.AND: np.bitwise_and, Op.OR: np.bitwise_or, Op.XOR: np.bitwise_xor}


def _single_op(region: Block) -> Optional[Instr]:
    """The instruction of a region `^(a, b): r = op a, b; yield r`, else None."""
    if len(region.args) != 2 or len(region.instrs) != 2:
        return None
    ins, term = region.instrs
    if term.op is not Op.YIELD or len(term.operands) != 1 or term.operands[0] is not ins.result:
        return None
    if len(ins.operands) != 2 or {id(v) for v in ins.operands} != {id(a) for a in region.args}:
        return None
    return ins


def _fast_ufunc(region: Block, elem) -> tuple[Optional[np.ufunc], Optional[np.dtype]]:
    """(ufunc, dtype) whose reduce/accumulate computes this region exactly, else Nones."""
    ins = _single_op(region)
    if ins is None or not isinstance(elem, ScalarType) or element_of(ins.result.type) != elem:
        return None, None
    op = ins.op
    exact_float = elem.name in ("f32", "f64")
    plain_int = elem.is_int and not elem.is_bool
    if op in (Op.ADD, Op.MUL) and (plain_int or exact_float):
        return (np.add if op is Op.ADD else np.multiply), storage_dtype(elem)
    if op in (Op.MAXIMUM, Op.MINIMUM) and not elem.is_bool:
        nan = bool(ins.attrs.propagate_nan) if ins.attrs is not None else False
        if op is Op.MAXIMUM:
            return (np.maximum if nan else np.fmax), None
        return (np.minimum if nan else np.fmin), None
    if op in _BITWISE and elem.is_int:
        return _BITWISE[op], None
    return None, None


def _combiner(blk: CompiledBlock) -> Callable:
    """Evaluate the compiled region on lists of arrays: combine(env, accs, news)."""
    arg_slots, term_slots, steps = blk.arg_slots, blk.term_slots, blk.steps

    def combine(env, accs: list, news: list) -> list:
        for s, v in zip(arg_slots, accs + news):
            env[s] = v
        run_steps(steps, env)
        shape = np.shape(accs[0])
        out = []
        for s in term_slots:
            r = env[s]
            # A region yielding a constant gives a scalar: bring it to the pair shape.
            out.append(r if np.shape(r) == shape else np.broadcast_to(r, shape))
        return out

    return combine


def _along(axis: int, ndim: int, index) -> tuple:
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


def tree_reduce(env, xs: list, axis: int, combine: Callable) -> list:
    n, ndim = xs[0].shape[axis], xs[0].ndim
    while n > 1:
        half = n // 2
        even = _along(axis, ndim, slice(0, 2 * half, 2))
        odd = _along(axis, ndim, slice(1, 2 * half, 2))
        out = combine(env, [x[even] for x in xs], [x[odd] for x in xs])
        if n % 2:
            last = _along(axis, ndim, slice(n - 1, n))
            out = [np.concatenate([r, x[last]], axis=axis) for r, x in zip(out, xs)]
        xs, n = out, half + n % 2
    first = _along(axis, ndim, 0)
    return [x[first] for x in xs]


def hillis_steele_scan(env, xs: list, axis: int, combine: Callable) -> list:
    n, ndim = xs[0].shape[axis], xs[0].ndim
    d = 1
    while d < n:
        out = combine(env, [x[_along(axis, ndim, slice(0, n - d))] for x in xs],
                      [x[_along(axis, ndim, slice(d, n))] for x in xs])
        head = _along(axis, ndim, slice(0, d))
        xs = [np.concatenate([x[head], r], axis=axis) for x, r in zip(xs, out)]
        d *= 2
    return xs


def _region_setup(ins: Instr, c: Compiler):
    xs = c.slots(ins.operands)
    outs = c.slots(ins.results)
    blk = c.block(ins.regions[0])
    elem = element_of(ins.operands[0].type)
    ufunc, dtype = _fast_ufunc(ins.regions[0], elem) if len(xs) == 1 else (None, None)
    axis = ins.attrs.axis
    ndim = len(shape_of(ins.operands[0].type))
    return xs, outs, blk, ufunc, dtype, axis if axis >= 0 else axis + ndim


@rule(Op.REDUCE)
def reduce(ins: Instr, c: Compiler) -> Step:
    xs, outs, blk, ufunc, dtype, axis = _region_setup(ins, c)
    if ufunc is not None:
        (x,), (o,) = xs, outs

        def fast(env):
            env[o] = ufunc.reduce(env[x], axis=axis, dtype=dtype)
        return fast
    combine = _combiner(blk)

    def step(env):
        results = tree_reduce(env, [np.asarray(env[s]) for s in xs], axis, combine)
        for s, r in zip(outs, results):
            env[s] = r
    return step


@rule(Op.SCAN)
def scan(ins: Instr, c: Compiler) -> Step:
    xs, outs, blk, ufunc, dtype, axis = _region_setup(ins, c)
    reverse = bool(ins.attrs.reverse)
    if ufunc is not None:
        (x,), (o,) = xs, outs
        if reverse:
            def fast_rev(env):
                env[o] = np.flip(ufunc.accumulate(np.flip(env[x], axis), axis=axis, dtype=dtype), axis)
            return fast_rev

        def fast(env):
            env[o] = ufunc.accumulate(env[x], axis=axis, dtype=dtype)
        return fast
    combine = _combiner(blk)

    def step(env):
        vals = [np.asarray(env[s]) for s in xs]
        if reverse:
            vals = [np.flip(v, axis) for v in vals]
        results = hillis_steele_scan(env, vals, axis, combine)
        if reverse:
            results = [np.flip(r, axis) for r in results]
        for s, r in zip(outs, results):
            env[s] = r
    return step
