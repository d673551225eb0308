"""Register tiles staged once in shared memory for the wgmma dots that read them as B
(sm_90a), and read back from there by their conversions.

wgmma reads B from shared memory only. A B computed in registers (fla's gated-delta
state `h` cast to bf16; the new values `v` after their gating) is otherwise stored by
each dot's lowering into that dot's scratch (`lower_wgmma._store_register_b`): the state
loop's two dots `dot(k1, v)` and `dot(k2, v)` stored `v` twice, and `h`, also stored to
global memory, went through shared memory a second time for its conversion to the
store's layout. As Triton's `local_alloc` of a dot operand, such a value is instead
written once into a buffer of its own:

    buf = local_alloc smem<1 x K x N>       (before the outermost loop around the value)
    ...
    x = ...                                 (the register tile)
    local_store buf, 0, x                   (stmatrix where x holds fragments; the proxy
                                             fence and a CTA barrier: `lower_shared`)
    xs = local_load buf, 0                  (each dot reads it in place: its NVMMA layout
                                             is the slot's, `lower_shared.buffer_layout`)
    ... dot(a, xs) ... dot(a', xs) ...
    y = local_load buf, 0 : #store-layout   (each conversion of x through shared memory
                                             reads the slot instead: 16-byte reads of
                                             the swizzled rows, no writes, no barrier)
    local_dealloc buf                       (after that loop)

A value is staged (16-bit: the only B wgmma reads from registers, `mma.staged_register_b`)
when at least two wgmma dots read it as B, or one does and it is also
converted through shared memory, all in the value's own block (one dot alone keeps its
scratch: the same writes, and no buffer held across the loop). The barrier pass orders
the buffer's writes after the previous iteration's reads (`shared_memory`). Kernels
with warp roles keep the dots' scratch (their barriers are their partitions' own).
"""
from __future__ import annotations

from typing import Optional

from ...ir.builder import Builder
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import I32, SmemType, element_of, shape_of
from ...passes.ir_utils import users_of
from .convert import conversion_kind_of
from .encode_layouts import plan_from_types
from .encodings import layout_of
from .mma import staged_register_b
from .slot_views import slot_read


def stage_register_operands(kernel: Kernel, num_warps: int, capability: int) -> Kernel:
    """Stage (in place) every register tile that qualifies (see the module docstring)."""
    if capability < 90 or any(ins.op is Op.WARP_ROLE for ins in kernel.walk()):
        return kernel
    plan = plan_from_types(kernel, num_warps)
    uses = users_of(kernel.body)
    block_of, parent = _structure(kernel)
    for value, dots in _register_b_readers(kernel, plan).items():
        owner = value.owner
        if not isinstance(owner, Instr):  # a block argument: no op to store after
            continue
        home = block_of[owner]
        readers = uses.get(value, [])
        converts = [u for u in readers if u.op is Op.CONVERT_LAYOUT and block_of[u] is home
                    and conversion_kind_of(layout_of(value.type), layout_of(u.results[0].type), value) == "smem"]
        if any(block_of[d] is not home for d in dots) or len(dots) + len(converts) < 2:
            continue
        _stage(value, home, dots, converts, parent)
    return kernel


def _register_b_readers(kernel: Kernel, plan) -> dict[Value, list[Instr]]:
    """Register tile → the wgmma dots that read it as B (and not as A or accumulator)."""
    out: dict[Value, list[Instr]] = {}
    for ins in kernel.walk():
        choice = plan.mma.get(ins) if ins.op is Op.DOT else None
        if choice is None or not staged_register_b(choice, slot_read(ins.operands[1]) is not None):
            continue
        b = ins.operands[1]
        if b is ins.operands[0] or b is ins.operands[2] or len(shape_of(b.type)) != 2:
            continue
        out.setdefault(b, []).append(ins)
    return out


def _structure(kernel: Kernel) -> tuple[dict[Instr, Block], dict[Block, tuple[Instr, Block]]]:
    """Each instruction's block, and each region's (owning op, the op's block)."""
    block_of: dict[Instr, Block] = {}
    parent: dict[Block, tuple[Instr, Block]] = {}

    def visit(block: Block) -> None:
        for ins in block.instrs:
            block_of[ins] = block
            for region in ins.regions:
                parent[region] = (ins, block)
                visit(region)

    visit(kernel.body)
    return block_of, parent


def _outermost_loop(block: Block, parent: dict[Block, tuple[Instr, Block]]) -> Optional[tuple[Instr, Block]]:
    """The outermost loop around `block` (and the block it sits in), if any."""
    found = None
    while block in parent:
        op, outer = parent[block]
        if op.op in (Op.FOR, Op.WHILE):
            found = (op, outer)
        block = outer
    return found


def _stage(value: Value, home: Block, dots: list[Instr], converts: list[Instr],
           parent: dict[Block, tuple[Instr, Block]]) -> None:
    owner: Instr = value.owner
    b = Builder()
    b.loc = owner.loc
    # the buffer: around the outermost loop, else around the value's readers
    loop = _outermost_loop(home, parent)
    outer, first = (loop[1], loop[0]) if loop is not None else (home, owner)
    b.set_insertion_before(outer, outer.instrs.index(first))
    buf = b.op1(Op.LOCAL_ALLOC, type=SmemType((1,) + tuple(shape_of(value.type)), element_of(value.type)))
    slot = b.constant(0, I32)
    # the store right after the value, one read for the dots (in place: no code)
    b.set_insertion_before(home, home.instrs.index(owner) + 1)
    b.create(Op.LOCAL_STORE, [buf, slot, value])
    staged = b.op1(Op.LOCAL_LOAD, buf, slot, type=value.type)
    for d in dots:
        d.operands[1] = staged
    # each conversion through shared memory: a read of the slot in its layout
    reads = []
    for conv in converts:
        read = Instr(Op.LOCAL_LOAD, [buf, slot], conv.results, None, [], conv.loc)
        home.instrs[home.instrs.index(conv)] = read
        reads.append(read)
    if loop is not None:
        last = outer.instrs.index(loop[0])
    else:  # after the last reader (the conversions are reads of the slot by now)
        last = max(home.instrs.index(r) for r in dots + reads)
    outer.instrs.insert(last + 1, Instr(Op.LOCAL_DEALLOC, [buf], [], None, [], owner.loc))
