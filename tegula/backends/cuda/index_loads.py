"""Loads in a pipelined loop's address code: the row indices of a gather (a MoE
kernel's `x_ptr + token_idx[:, None] * stride`, `token_idx` loaded in the loop), which
the pipeliner (`pipeline_plan`, `pipeline_loops`) lets into the code it runs S-1
iterations ahead: which loads qualify, and their copy for a later iteration."""
from __future__ import annotations

from dataclasses import replace

from ...ir.accessors import memory_operands
from ...ir.builder import Builder
from ...ir.clone import clone_instr
from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import element_of, shape_of


def is_index_load(ins: Instr) -> bool:
    """Whether `ins` may be part of a pipelined load's address code: a plain load from
    global memory, such as the row indices of a gather (a MoE kernel's
    `x_ptr + token_idx[:, None] * stride`, `token_idx` loaded in the loop). Its copy for
    iteration k+S-1 runs with that iteration's copies, as a synchronous load masked off
    where the iteration does not exist; the loop must not write where it reads
    (`writes_what_it_prefetches`). Triton's pipeliner likewise issues such indices a
    stage before the copies they address."""
    if ins.op is not Op.LOAD or ins.attrs.volatile:
        return False
    elem = element_of(memory_operands(ins).pointer.type)
    return getattr(elem, "address_space", None) == 1


def load_if_live(bb: Builder, ins: Instr, mapping: dict[Value, Value], live: Value) -> Instr:
    """A load of the address code (`LoopPlan.index_loads`) for the iteration `mapping`
    binds, its mask ANDed with `live` (that iteration exists): past the loop's end
    the copies it addresses are off, and the load must not read past its array either
    (its value there is never used)."""
    mem = memory_operands(ins)
    shape = shape_of(ins.results[0].type)
    pred = bb.splat(live, shape) if shape else live
    if mem.mask is not None:
        pred = bb.op1(Op.AND, mapping.get(mem.mask, mem.mask), pred)
    rest = [mapping.get(mem.other, mem.other)] if mem.other is not None else []
    copy = clone_instr(ins, mapping)
    copy.operands = [copy.operands[0], pred, *rest]
    copy.attrs = replace(ins.attrs, has_mask=True)
    return copy
