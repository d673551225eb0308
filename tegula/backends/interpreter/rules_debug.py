"""Rules of the meta ops: device_print, device_assert, assume, hint, debug_barrier.

`device_print` writes one line per element to stdout, in the GPU's format:
    pid (X, Y, Z) idx (I, J)<prefix><value>
with `(operand N) ` before the value when several operands are printed, index fields
padded to the width of ceil(log10(dim)) digits, floats as `%f`, integers as `%i` /
`%u` by signedness, `hex` as `0x` and the bit pattern padded to the type's width,
pointers as their (fake) address. The prefix is printed as the IR holds it (the
language layer adds the leading space and trailing ": " as Triton's does). The GPU
prints elements in no particular order; the interpreter prints operand by operand in
row-major order.

`device_assert` (emitted by the frontend only when debugging is on) raises
`DeviceAssertionError` naming the first failing element. `assume` is checked only in
debug mode (a false assumption is undefined behaviour on the GPU); `hint` passes its
operand through; `debug_barrier` is a no-op (programs run one at a time).
"""
from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from ...errors import DeviceAssertionError
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import PointerType, element_of, shape_of
from .compiler import Compiler, source_loc
from .memory import Ptr
from .registry import MEMORY_SLOT, PID_TUPLE_SLOT, Step, rule
from .values import to_memory


def _formatter(elem, hex_: bool):
    """A function formatting one storage element like the GPU's printf."""
    if isinstance(elem, PointerType):
        return lambda v: hex(int(v))
    if hex_:
        digits = elem.bits // 4
        if elem.is_float:
            return lambda v: f"0x{int(to_memory(np.asarray(v), elem).view(_uint(elem))):0{digits}x}"
        mask = (1 << elem.bits) - 1
        return lambda v: f"0x{int(v) & mask:0{digits}x}"
    if elem.is_float:
        return lambda v: "%f" % float(v)
    return lambda v: "%d" % int(v)


def _uint(elem) -> np.dtype:
    return np.dtype(f"u{max(1, elem.bits // 8)}")


def _index_formatter(shape: tuple[int, ...]):
    widths = [math.ceil(math.log10(d)) if d > 0 else 0 for d in shape]

    def fmt(idx: tuple[int, ...]) -> str:
        return ", ".join(str(i).rjust(w) for i, w in zip(idx, widths))
    return fmt


@rule(Op.DEVICE_PRINT)
def device_print(ins: Instr, c: Compiler) -> Step:
    prefix = ins.attrs.prefix if ins.attrs is not None else ""
    hex_ = bool(ins.attrs.hex) if ins.attrs is not None else False
    slots = c.slots(ins.operands)
    many = len(slots) > 1
    plans = []
    for k, v in enumerate(ins.operands):
        elem = element_of(v.type)
        shape = shape_of(v.type)
        tag = f"(operand {k}) " if many else ""
        plans.append((slots[k], shape, _index_formatter(shape), _formatter(elem, hex_), tag,
                      isinstance(elem, PointerType)))

    def step(env):
        x, y, z = env[PID_TUPLE_SLOT]
        head = f"pid ({x}, {y}, {z})"
        if not plans:
            sys.stdout.write(f"{head}{prefix}\n")
            return
        lines = []
        for slot, shape, fmt_idx, fmt_val, tag, is_ptr in plans:
            value: Any = env[slot]
            if is_ptr:
                value = env[MEMORY_SLOT].address(value) if isinstance(value, Ptr) else value
            arr = np.broadcast_to(np.asarray(value), shape)
            for idx in np.ndindex(*shape) if shape else [()]:
                lines.append(f"{head} idx ({fmt_idx(idx)}){prefix}{tag}{fmt_val(arr[idx])}")
        sys.stdout.write("\n".join(lines) + "\n")
    return step


@rule(Op.DEVICE_ASSERT)
def device_assert(ins: Instr, c: Compiler) -> Step:
    cond = c.slot(ins.operands[0])
    message = ins.attrs.message if ins.attrs is not None else ""
    return _check(ins, cond, f"device assertion failed: {message}")


def _check(ins: Instr, cond: int, text: str) -> Step:
    def step(env):
        ok = np.asarray(env[cond])
        if ok.all():
            return
        if ok.ndim:
            bad = ~ok.astype(bool)
            first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
            where = (f" (first failing element at index {first}; "
                     f"{int(np.count_nonzero(bad))} of {bad.size} failed)")
        else:
            where = ""
        raise DeviceAssertionError(text + where, loc=source_loc(ins), pid=env[PID_TUPLE_SLOT])
    return step


@rule(Op.ASSUME)
def assume(ins: Instr, c: Compiler) -> Step:
    if not c.debug:
        return None
    return _check(ins, c.slot(ins.operands[0]), "assumption violated (tl.assume)")


@rule(Op.HINT)
def hint(ins: Instr, c: Compiler) -> Step:
    c.alias(ins.result, c.slot(ins.operands[0]))
    return None


@rule(Op.DEBUG_BARRIER)
def debug_barrier(ins: Instr, c: Compiler) -> Step:
    return None


@rule(Op.GDC_WAIT, Op.GDC_LAUNCH_DEPENDENTS)
def grid_dependency_control(ins: Instr, c: Compiler) -> Step:
    # launches run one after another here: the previous grid has always completed
    return None
