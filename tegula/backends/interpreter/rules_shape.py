"""Rules of source ops (constant, arange, program_id, num_programs, smid, globaltimer)
and shape ops.

Sources cost nothing at run time: constants and aranges are made once, read-only, and
pre-filled in the environment; program ids alias the reserved pid slots. The hardware
counters have host meanings: `smid` is 0 (programs run one at a time, on no
multiprocessor), `globaltimer` reads the monotonic clock in nanoseconds at each step.

Shape ops: splat and broadcast fill a new array (a zero-stride `np.broadcast_to` view
above 16K elements, where copying costs more than numpy's view setup), expand_dims is
an indexing view, reshape is row-major, permute is a transpose, join stacks on a new
last axis and split takes the two halves of a last axis of size 2. A shape op of a
compile-time constant is itself folded to a constant. On pointer tiles they apply to
the offsets (and to the buffer indices of a mixed tile).
"""
from __future__ import annotations

import time

import numpy as np

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import PointerType, TileType, element_of, shape_of
from .compiler import Compiler
from .memory import Ptr, join_ptr, map_ptr
from .registry import MEMORY_SLOT, NPROG_SLOTS, PID_SLOTS, Step, rule
from .values import constant_value


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@rule(Op.CONSTANT)
def constant(ins: Instr, c: Compiler) -> Step:
    t = ins.result.type
    elem = element_of(t)
    value = ins.attrs.value
    if isinstance(elem, PointerType):
        # An integer literal of pointer type (null, typically): resolve per launch.
        o = c.slot(ins.result)
        shape = shape_of(t)

        def step(env):
            env[o] = env[MEMORY_SLOT].resolve(np.full(shape, int(value), dtype=np.int64)[()])
        return step
    scalar = constant_value(value, elem)
    if isinstance(t, TileType):
        c.constant(ins.result, _frozen(np.full(t.shape, scalar, dtype=scalar.dtype)))
    else:
        c.constant(ins.result, scalar)
    return None


@rule(Op.ARANGE)
def arange(ins: Instr, c: Compiler) -> Step:
    a = ins.attrs
    c.constant(ins.result, _frozen(np.arange(a.start, a.end, dtype=np.int32)))
    return None


@rule(Op.PROGRAM_ID)
def program_id(ins: Instr, c: Compiler) -> Step:
    c.alias(ins.result, PID_SLOTS[ins.attrs.axis])
    return None


@rule(Op.NUM_PROGRAMS)
def num_programs(ins: Instr, c: Compiler) -> Step:
    c.alias(ins.result, NPROG_SLOTS[ins.attrs.axis])
    return None


@rule(Op.SMID)
def smid(ins: Instr, c: Compiler) -> Step:
    c.constant(ins.result, np.int32(0))
    return None


@rule(Op.GLOBALTIMER)
def globaltimer(ins: Instr, c: Compiler) -> Step:
    o = c.slot(ins.result)

    def step(env):
        env[o] = np.int64(time.monotonic_ns())
    return step


def _shape_step(ins: Instr, c: Compiler, fn) -> Step:
    a, o = c.slot(ins.operands[0]), c.slot(ins.result)
    if a in c.constants:
        # Shapes are static, so a shape op of a constant is a constant.
        c.constant(ins.result, _frozen(np.array(fn(c.constants[a]))) if shape_of(ins.result.type)
                   else fn(c.constants[a]))
        return None

    def step(env):
        x = env[a]
        env[o] = map_ptr(fn, x) if isinstance(x, Ptr) else fn(x)
    return step


# Up to this many elements a broadcast is materialized: numpy's broadcast_to costs more
# than filling a small array, and consumers then see ordinary contiguous arrays.
_MATERIALIZE = 1 << 14


@rule(Op.SPLAT, Op.BROADCAST)
def broadcast(ins: Instr, c: Compiler) -> Step:
    shape = shape_of(ins.result.type)
    if shape_of(ins.operands[0].type) == shape:
        c.alias(ins.result, c.slot(ins.operands[0]))
        return None
    if int(np.prod(shape)) > _MATERIALIZE:
        return _shape_step(ins, c, lambda x: np.broadcast_to(x, shape))

    def fill(x):
        out = np.empty(shape, dtype=x.dtype)
        out[...] = x
        return out
    return _shape_step(ins, c, fill)


@rule(Op.EXPAND_DIMS)
def expand_dims(ins: Instr, c: Compiler) -> Step:
    ndim = len(shape_of(ins.operands[0].type))
    axis = ins.attrs.axis if ins.attrs.axis >= 0 else ins.attrs.axis + ndim + 1
    index = (slice(None),) * axis + (None,)
    return _shape_step(ins, c, lambda x: np.asarray(x)[index])


@rule(Op.RESHAPE)
def reshape(ins: Instr, c: Compiler) -> Step:
    shape = shape_of(ins.result.type)
    return _shape_step(ins, c, lambda x: np.reshape(x, shape)[()])


@rule(Op.PERMUTE)
def permute(ins: Instr, c: Compiler) -> Step:
    order = tuple(ins.attrs.order)
    return _shape_step(ins, c, lambda x: np.transpose(x, order))


def _stack(parts):
    return np.stack(parts, axis=-1)


@rule(Op.JOIN)
def join(ins: Instr, c: Compiler) -> Step:
    a, b = c.slots(ins.operands)
    o = c.slot(ins.result)

    def step(env):
        x, y = env[a], env[b]
        env[o] = join_ptr(env[MEMORY_SLOT], _stack, [x, y]) if isinstance(x, Ptr) else _stack([x, y])
    return step


@rule(Op.SPLIT)
def split(ins: Instr, c: Compiler) -> Step:
    a = c.slot(ins.operands[0])
    lo, hi = c.slots(ins.results)
    first = lambda x: x[..., 0]  # noqa: E731
    second = lambda x: x[..., 1]  # noqa: E731

    def step(env):
        x = env[a]
        if isinstance(x, Ptr):
            env[lo], env[hi] = map_ptr(first, x), map_ptr(second, x)
        else:
            env[lo], env[hi] = x[..., 0], x[..., 1]
    return step
