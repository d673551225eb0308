"""Rules of `atomic_rmw` and `atomic_cas` (the checked memory side is `access.read_modify_write`).

Each kind's update works on memory images: integer add wraps; `fadd` rounds once to
the element type, as the GPU's atomic float add does (f16 and bf16 sums are formed in
float64, where they are exact, then rounded); max/min compare signed or unsigned by the
element type; `atomic_cas` compares bit patterns (so -0.0 differs from 0.0 and a NaN
can match itself, as on the GPU). Results are the old values, 0 in masked-off lanes.
Memory semantics and scopes do not change results here: the interpreter runs one
program at a time, in order.
"""
from __future__ import annotations

import numpy as np

from ...ir import numpy_ops as npo
from ...ir.accessors import memory_operands
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import ScalarType, element_of
from .access import AccessFault, Update, read_modify_write
from .compiler import Compiler
from .registry import MEMORY_SLOT, Step, rule
from .rules_memory import located_access_error
from .values import from_memory, memory_dtype, to_memory


def _round_f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """float64 → nearest-even bf16 value (as float32), rounding once."""
    m, e = np.frexp(x)
    return np.ldexp(np.rint(m * 256.0), e - 8).astype(np.float32)


def _fadd(elem: ScalarType) -> Update:
    if elem.name in ("f32", "f64"):
        return lambda old, val: old + val
    if elem.name == "f16":
        return lambda old, val: (old.astype(np.float64) + val.astype(np.float64)).astype(np.float16)
    if elem.name == "bf16":
        def bf16_add(old, val):
            s = npo.bf16_bits_to_f32(old).astype(np.float64) + npo.bf16_bits_to_f32(val).astype(np.float64)
            return npo.f32_to_bf16_bits(_round_f64_to_bf16(s))
        return bf16_add
    raise NotImplementedError(f"atomic float add of {elem}")


def _update(kind: str, elem: ScalarType) -> Update:
    if kind == "fadd":
        return _fadd(elem)
    simple = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
              "or": np.bitwise_or, "xor": np.bitwise_xor}
    if kind == "xchg":
        return lambda old, val: val
    return simple[kind]


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _cas(old: np.ndarray, cmp: np.ndarray, val: np.ndarray) -> np.ndarray:
    return np.where(_bits(old) == _bits(cmp), val, old)


@rule(Op.ATOMIC_RMW)
def atomic_rmw(ins: Instr, c: Compiler) -> Step:
    attrs = ins.attrs
    parts = memory_operands(ins)
    p, v = c.slot(parts.pointer), c.slot(parts.value)
    m = c.slot(parts.mask) if parts.mask is not None else None
    o = c.slot(ins.result)
    elem = element_of(ins.operands[0].type).pointee
    mdt, type_name = memory_dtype(elem), str(elem)
    update = _update(attrs.kind, elem)

    def step(env):
        val = np.asarray(to_memory(env[v], elem), dtype=mdt)
        try:
            old = read_modify_write(env[MEMORY_SLOT], env[p], env[m] if m is not None else None, mdt, type_name,
                                    update, val)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
        env[o] = from_memory(old, elem)
    return step


@rule(Op.ATOMIC_CAS)
def atomic_cas(ins: Instr, c: Compiler) -> Step:
    p, cm, v = c.slots(ins.operands)
    o = c.slot(ins.result)
    elem = element_of(ins.operands[0].type).pointee
    mdt, type_name = memory_dtype(elem), str(elem)

    def step(env):
        cmp = np.asarray(to_memory(env[cm], elem), dtype=mdt)
        val = np.asarray(to_memory(env[v], elem), dtype=mdt)
        try:
            old = read_modify_write(env[MEMORY_SLOT], env[p], None, mdt, type_name, _cas, cmp, val)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
        env[o] = from_memory(old, elem)
    return step
