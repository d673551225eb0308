"""written_arguments: which pointer arguments of a kernel it may write through.

The runtime uses this to know which arrays a launch modifies (autotuning restores only
those; a CPU-side copy is written back only for those). It must never miss one, so
every unclear case answers "all pointer arguments".

Each memory op that is not pure (`store`, `atomic_rmw`, `atomic_cas`,
`descriptor_store`, `descriptor_reduce`, `block_store`; its pointer, descriptor or
block pointer is operand 0) is
traced back to the arguments its pointer can derive from, through
`addptr` (the pointer side), `select` (both values), shape ops, `hint`, pointer
bitcasts, `join`/`split`, `make_tensor_descriptor` and `make_block_ptr` / `advance` (an
access writes through the base), and loop-carried values (`for` / `while` / `if` results and
region arguments, following initial values and yields). Anything else that produces a
pointer — a pointer loaded from memory, `int_to_ptr`, a constant — could point
anywhere: all pointer arguments are reported. Inline assembly with side effects
(`inline_asm_elementwise`, `is_pure=False`) counts as reading and writing through each
pointer operand it is given.
"""
from __future__ import annotations

from ..ir.accessors import for_inits, for_yields
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import OP_INFO, Kind, Op
from ..ir.types import is_pointer
from .ir_utils import flow_sources, pointer_args, region_parents

# ops whose pointer result points into the same allocation as these operands
_PASS_THROUGH = {
    Op.ADDPTR: (0,), Op.SELECT: (1, 2), Op.BITCAST: (0,), Op.SPLAT: (0,),
    Op.BROADCAST: (0,), Op.EXPAND_DIMS: (0,), Op.RESHAPE: (0,), Op.PERMUTE: (0,),
    Op.HINT: (0,), Op.JOIN: (0, 1), Op.SPLIT: (0,),
    # a descriptor's or block pointer's accesses reach its base pointer (their ops take
    # the descriptor / block pointer as operand 0; an advanced block pointer is operand 0)
    Op.MAKE_TENSOR_DESCRIPTOR: (0,), Op.MAKE_BLOCK_PTR: (0,), Op.ADVANCE: (0,),
}


def written_arguments(kernel: Kernel) -> set[str]:
    """Names of the pointer kernel arguments that some store may write through."""
    return _arguments_behind(kernel, lambda ins, info: not info.pure)


def read_arguments(kernel: Kernel) -> set[str]:
    """Names of the pointer kernel arguments that some load or atomic may read through
    (the same tracing as `written_arguments`, from the reading ops)."""
    return _arguments_behind(kernel, lambda ins, info: ins.op not in (Op.STORE, Op.BLOCK_STORE))


def _arguments_behind(kernel: Kernel, selects) -> set[str]:
    """Pointer arguments the pointer operand of each memory op `selects(ins, info)`
    accepts may derive from (all of them when one cannot be traced)."""
    pointers = []
    for ins in kernel.walk():
        info = OP_INFO[ins.op]
        if info.kind is Kind.MEMORY and selects(ins, info) and ins.operands:
            pointers.append(ins.operands[0])
        elif ins.op is Op.INLINE_ASM and not ins.attrs.is_pure:
            # assembly with side effects may load or store through any pointer it is given
            pointers.extend(o for o in ins.operands if is_pointer(o.type))
    found = pointer_arguments_behind(kernel, pointers)
    return {name for name, _ in pointer_args(kernel)} if found is None else found


def pointer_arguments_behind(kernel: Kernel, pointers: list[Value]) -> set[str] | None:
    """Names of the pointer arguments the pointer values `pointers` may derive from;
    None when some cannot be traced to arguments (a pointer loaded from memory,
    `int_to_ptr`, a constant)."""
    args = pointer_args(kernel)
    by_value = {v: name for name, v in args}
    parents = region_parents(kernel)

    written: set[str] = set()
    seen: set[Value] = set()
    work: list[Value] = list(pointers)
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in by_value:
            written.add(by_value[v])
            continue
        sources = _sources(v, parents)
        if sources is None:
            return None
        work.extend(sources)
    return written


def _sources(v: Value, parents: dict[Block, tuple[Instr, int]]) -> list[Value] | None:
    """Values `v` may have been computed from as a pointer, or None if unknown."""
    owner = v.owner
    if isinstance(owner, Instr) and owner.op in _PASS_THROUGH:
        return [owner.operands[i] for i in _PASS_THROUGH[owner.op]]
    return flow_sources(v, parents)
    if isinstance(owner, Block) and owner in parents:
        ins, region = parents[owner]
        i = owner.args.index(v)
        if ins.op is Op.FOR and i > 0:
            return [for_inits(ins)[i - 1], for_yields(ins)[i - 1]]
        if ins.op is Op.WHILE and region == 0:
            return [ins.operands[i], ins.regions[1].terminator.operands[i]]
        if ins.op is Op.WHILE and region == 1:
            return [ins.regions[0].terminator.operands[1 + i]]
    return None
