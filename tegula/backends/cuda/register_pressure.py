"""The registers a `tgir` kernel's loops must hold across their back edges, read from
the layouts in its types: a lower bound on what ptxas needs per thread, known before
ptxas runs.

A loop's carried values (its `for` iter args, a `while`'s carried values) and those of
the loops around it are all live at once where the loop branches back, so when their
32-bit registers per thread exceed a CTA's share of the register file the kernel spills
whatever ptxas does. The compiler then assembles with that share straight away
(compiler.py) instead of first letting ptxas aim at an occupancy it cannot reach: left
alone, ptxas gave fla's chunk_fwd_kernel_h with a 128x128 f32 state on one warp (512
registers of state per thread) 64 registers and 24.7 KB of spills, on two warps 32 and
18.7 KB, where `.maxnreg 255` gives 13 KB and 3.8 KB; the first run was wasted time.
"""
from __future__ import annotations

from ...ir.accessors import for_yields
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import PointerType, ScalarType, TileType, element_of
from .encodings import layout_of

_LOOPS = (Op.FOR, Op.WHILE)


def value_registers(v: Value) -> int:
    """32-bit registers per thread `v` takes: its distinct elements per thread in its
    layout (broadcast copies not counted), packed into 32-bit words. Only numbers and
    pointers count (not i1, which ptxas keeps in predicates, nor handles such as shared
    buffers or descriptors): what is counted is a lower bound."""
    t = v.type
    elem = element_of(t)
    if not isinstance(elem, (ScalarType, PointerType)) or elem.bits == 1:
        return 0
    if isinstance(t, TileType):
        lay = layout_of(t)
        elements = lay.drop_dependent_regs().n_regs if lay is not None else 0
    else:
        elements = 1
    return elements * elem.bits // 32


def loop_carried_registers(kernel: Kernel) -> int:
    """The most 32-bit registers per thread live across a loop's back edge: its carried
    values' (a loop's results are what it carries) and those of the loops around it;
    0 without loops."""
    return _most_carried(kernel.body, 0)


def _most_carried(block: Block, around: int) -> int:
    most = 0
    for ins in block.instrs:
        here = around
        if ins.op in _LOOPS:
            here += _loop_carried(ins)
            most = max(most, here)
        for region in ins.regions:
            most = max(most, _most_carried(region, here))
    return most


def _loop_carried(loop: Instr) -> int:
    """The registers a thread `loop` itself carries (a loop's results are what it carries)."""
    if loop.op is Op.FOR:
        body = loop.regions[0]
        return sum(_carried_registers(body.args[k + 1], y) for k, y in enumerate(for_yields(loop)))
    return sum(value_registers(v) for v in loop.results)


def _carried_registers(arg: Value, yielded: Value) -> int:
    """What a `for`'s carried value `arg` must hold across the back edge. A pointer tile
    the loop advances by one offset for all its elements (`a_ptrs += BLOCK_K *
    stride_ak`) needs no more than one 64-bit base: its elements' distances from it do
    not change, and what they cost is not carried (they are the same in every
    iteration). Counted per element, the 128x256x64 matmul's two pointer tiles made
    its loops carry 322 registers a thread, and every compile of it assembled first
    under a cap meant for kernels that must spill."""
    ins = yielded.owner
    if (isinstance(arg.type, TileType) and isinstance(ins, Instr) and ins.op is Op.ADDPTR
            and ins.operands[0] is arg and _uniform(ins.operands[1])):
        return 2
    return value_registers(arg)


def _uniform(v: Value) -> bool:
    """Whether `v` has one value for all its elements: a scalar, or a splat of one."""
    if not isinstance(v.type, TileType):
        return True
    ins = v.owner
    return isinstance(ins, Instr) and ins.op in (Op.SPLAT, Op.CONSTANT)
