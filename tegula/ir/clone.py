"""Copies of IR: `clone_instr` (one instruction and its regions, operands renamed through
a mapping) and `clone_kernel` (a whole kernel, so a backend can transform its own copy
while the caller's kernel stays as it was).

The mapping is updated in place with every value the copy defines (results and block
arguments), so consecutive `clone_instr` calls over a block copy it with its def-use
chains; values missing from the mapping are used as they are (values defined outside
the cloned code).
"""
from __future__ import annotations

from dataclasses import replace

from .core import Block, Instr, Kernel, Value


def clone_block(block: Block, mapping: dict[Value, Value]) -> Block:
    new = Block()
    for a in block.args:
        mapping[a] = new.add_arg(a.type, a.name)
    for ins in block.instrs:
        new.instrs.append(clone_instr(ins, mapping))
    return new


def clone_instr(ins: Instr, mapping: dict[Value, Value]) -> Instr:
    operands = [mapping.get(v, v) for v in ins.operands]
    results = []
    for r in ins.results:
        mapping[r] = Value(r.type, r.name)
        results.append(mapping[r])
    regions = [clone_block(region, mapping) for region in ins.regions]
    return Instr(ins.op, operands, results, ins.attrs, regions, ins.loc, ins.smem)


def clone_kernel(kernel: Kernel) -> Kernel:
    mapping: dict[Value, Value] = {}
    return replace(kernel, body=clone_block(kernel.body, mapping),
                   arg_names=list(kernel.arg_names), arg_attrs=list(kernel.arg_attrs))
