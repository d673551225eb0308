"""pointer_table_arguments: the arguments holding the addresses a kernel turns into
pointers.

A kernel may take addresses from memory and use them as pointers: a pointer table
(grouped GEMM's int64 tensor of `data_ptr()`s, cast with `.to(tl.pointer_type(...))`)
or a load of pointer elements. The host backends check accesses through such pointers
against the live host arrays the addresses fall in; which arrays those are depends on
the addresses, so a launch reads the arguments named here and looks up their values
only (`backends/host_arrays.py`), instead of every array alive in the process.

Traced: the integer operand of each `int_to_ptr`, back through copies (shape ops,
`hint`, `select`, `join`/`split`, 64-bit bitcasts and casts, loop-carried values) to
loads, whose pointers are traced to pointer arguments (the tables), or to scalar
integer arguments (an address passed as a number); and the pointer operand of each
load of pointer elements. Anything else (an address computed with arithmetic, a
constant, a pointer an atomic returns, an untraceable table pointer) answers None: the
launch must then consider every live host array.
"""
from __future__ import annotations

from typing import Optional

from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import Op
from ..ir.types import PointerType, ScalarType, element_of
from .ir_utils import flow_sources, region_parents
from .written_args import pointer_arguments_behind

# ops whose integer result holds the values of these operands, unchanged
_COPIES = {
    Op.SELECT: (1, 2), Op.SPLAT: (0,), Op.BROADCAST: (0,), Op.EXPAND_DIMS: (0,), Op.RESHAPE: (0,),
    Op.PERMUTE: (0,), Op.HINT: (0,), Op.JOIN: (0, 1), Op.SPLIT: (0,), Op.GATHER: (0,),
}


def _is_64bit_int(v: Value) -> bool:
    e = element_of(v.type)
    return isinstance(e, ScalarType) and not e.is_float and e.bits == 64


def pointer_table_arguments(kernel: Kernel) -> Optional[set[str]]:
    """Names of the arguments whose values (a pointer argument's elements, a scalar
    argument itself) the kernel may use as addresses; empty when no pointer comes from
    memory or an integer; None when some address cannot be traced to arguments."""
    names = list(kernel.arg_names)
    by_value = {a: names[i] for i, a in enumerate(kernel.args)}
    parents = region_parents(kernel)
    tables: set[str] = set()
    table_pointers: list[Value] = []
    work: list[Value] = []
    for ins in kernel.walk():
        if ins.op is Op.INT_TO_PTR:
            work.append(ins.operands[0])
        elif ins.op is Op.LOAD and isinstance(element_of(ins.result.type), PointerType):
            table_pointers.append(ins.operands[0])
        elif ins.op in (Op.ATOMIC_RMW, Op.ATOMIC_CAS) and any(
                isinstance(element_of(r.type), PointerType) for r in ins.results):
            return None
    seen: set[Value] = set()
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in by_value:
            if isinstance(element_of(v.type), PointerType):
                return None  # a pointer argument's own address as an integer: not a table
            tables.add(by_value[v])
            continue
        owner = v.owner
        if isinstance(owner, Instr) and owner.op is Op.LOAD:
            table_pointers.append(owner.operands[0])
            continue
        if isinstance(owner, Instr) and owner.op is Op.PTR_TO_INT:
            # an argument's own address round trip: inside a known buffer already
            if pointer_arguments_behind(kernel, [owner.operands[0]]) is None:
                return None
            continue
        sources = _int_sources(v, parents)
        if sources is None:
            return None
        work.extend(sources)
    behind = pointer_arguments_behind(kernel, table_pointers)
    if behind is None:
        return None
    return tables | behind


def _int_sources(v: Value, parents: dict[Block, tuple[Instr, int]]) -> Optional[list[Value]]:
    """Values whose values `v` holds unchanged, or None if it computes new ones."""
    owner = v.owner
    if isinstance(owner, Instr):
        if owner.op in _COPIES:
            return [owner.operands[i] for i in _COPIES[owner.op]]
        if owner.op in (Op.BITCAST, Op.CAST):
            src = owner.operands[0]
            return [src] if _is_64bit_int(src) and _is_64bit_int(v) else None
    return flow_sources(v, parents)
