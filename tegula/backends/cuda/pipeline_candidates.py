"""Which loads of a loop the software pipeliner takes (`pipeline_loops`): a load read
only as an operand of tensor-core dots in the same body, directly or through a 2-D
transpose (then the slot holds the transposed tile); or, in a dot-free loop given its
own `num_stages`, any load whose copies move at least 4 bytes, unless the loop writes
into an argument it prefetches from. A `descriptor_load` left for TMA (`tma.tma_loads`)
is taken when it feeds wgmma dots only (`feeds_wgmma_only`).
"""
from __future__ import annotations

from typing import Optional

from ...ir.accessors import memory_operands
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import PointerType, TileType, element_of
from ...passes import axis_info, contiguity_order
from ...passes.ir_utils import uniform_constant_of
from .checked import pointer_origins
from .mma import choose_mma
from .slot_views import viewed_both_ways


def is_zero(v: Value) -> bool:
    """Whether `v` is the constant 0 (a scalar or a splat of one; not -0.0): what a
    cp.async's zero fill already gives."""
    c = uniform_constant_of(v)
    return c is not None and c == 0 and not (isinstance(c, float) and str(c) == "-0.0")


def zeroed_when(v: Value) -> Optional[tuple[Value, Value]]:
    """(cond, acc) when tile `v` is `select(splat(cond), 0, acc)` for a scalar `cond`:
    an accumulator restarted from zero where `cond` holds (a flattened loop nest's
    first inner iteration, `passes/flatten_loops.py`), which wgmma does with its
    scale-d predicate instead of selecting registers."""
    owner = v.owner
    if not isinstance(owner, Instr) or owner.op is not Op.SELECT or not isinstance(v.type, TileType):
        return None
    cond, zero, acc = owner.operands
    if not isinstance(cond.owner, Instr) or cond.owner.op is not Op.SPLAT or not is_zero(zero):
        return None
    return cond.owner.operands[0], acc


def is_candidate(ins: Instr, body: Block, uses: dict[Value, list[Instr]], num_warps: int,
                 capability: int, without_dot: Optional[dict] = None) -> bool:
    """Whether a load of `body` is pipelined: one read only by tensor-core dots (or
    through a transpose, or both ways on wgmma: `slot_views`), or in a dot-free loop
    with its own num_stages (`without_dot` is then a cache for the kernel's axis
    analysis), any load whose copies are at least 4-byte vectors."""
    if ins.op is Op.DESCRIPTOR_LOAD:
        return without_dot is None and feeds_wgmma_only(ins, body, uses, num_warps, capability)
    if ins.op is not Op.LOAD or ins.attrs.volatile:
        return False
    res = ins.results[0]
    if not isinstance(res.type, TileType) or not res.type.shape:
        return False
    mem = memory_operands(ins)
    ptr_elem = element_of(mem.pointer.type)
    if not isinstance(ptr_elem, PointerType) or ptr_elem.address_space != 1:
        return False
    if without_dot is not None:
        return prefetchable(ins, body, without_dot)
    if len(res.type.shape) != 2:
        return False
    if mem.other is not None and not is_zero(mem.other):
        return False
    if viewed_both_ways(res, body, uses, num_warps, capability) is not None:
        return True  # one ring, read directly and through a transposed view
    users = uses.get(res, [])
    perm = transposed_by(res, body, uses)
    if perm is not None:  # `desc.load(...).T`: the slot holds the transposed tile
        res = perm.results[0]
        users = uses.get(res, [])
    return bool(users) and all(
        u.op is Op.DOT and u in body.instrs and u.operands[2] is not res
        and choose_mma(u, num_warps, capability, b_in_shared=True, a_in_shared=True) is not None
        for u in users)


def feeds_wgmma_only(ins: Instr, body: Block, uses: dict[Value, list[Instr]], num_warps: int,
                     capability: int) -> bool:
    """Whether a 2-D tile load of `body` is read only (directly or through a transpose)
    as an operand of dots in the body that run on wgmma with it in a shared slot."""
    res = ins.results[0]
    if len(res.type.shape) != 2:
        return False
    if viewed_both_ways(res, body, uses, num_warps, capability) is not None:
        return True
    perm = transposed_by(res, body, uses)
    if perm is not None:
        res = perm.results[0]
    users = uses.get(res, [])
    for u in users:
        if u.op is not Op.DOT or u not in body.instrs or u.operands[2] is res:
            return False
        choice = choose_mma(u, num_warps, capability, b_in_shared=True, a_in_shared=True)
        if choice is None or choice.version != 3:
            return False
    return bool(users)


def _defined_in(v: Value, body: Block) -> bool:
    """Whether `v` is computed inside `body` (a result or a block argument in it)."""
    if v in body.args:
        return True
    for ins in body.walk():
        if v in ins.results or any(v in region.args for region in ins.regions):
            return True
    return False


def other_after_read(load: Instr) -> Optional[tuple[Value, Value]]:
    """(mask, other) of a load whose `other` is not zero: the zero-filled slot gets
    `select(mask, slot, other)` after the read; None when `other` is absent or 0."""
    mem = memory_operands(load)
    if mem.other is None or is_zero(mem.other):
        return None
    return mem.mask, mem.other


def writes_what_it_prefetches(kernel: Kernel, body: Block, loads: list[Instr]) -> bool:
    """Whether the loop stores (or updates atomically) through a pointer into the same
    argument one of its prefetched loads reads, or one whose argument is unknown: a
    later iteration's load, issued S-1 iterations early, could then miss that write.
    (Distinct arguments are taken not to overlap, as Triton's pipeliner does.)"""
    origins = pointer_origins(kernel)
    read = {origins.get(memory_operands(ld).pointer) for ld in loads}
    for ins in body.walk():
        if ins.op in (Op.STORE, Op.ATOMIC_RMW, Op.ATOMIC_CAS):
            o = origins.get(memory_operands(ins).pointer)
            if o is None or o in read:
                return True
    return False


def prefetchable(load: Instr, body: Block, cache: dict) -> bool:
    """A load of a dot-free loop worth a ring: its copies move >= 4 bytes per cp.async
    (contiguity, pointer alignment and mask constancy along the fastest dimension
    allow it), and a non-zero `other` comes with a mask, both defined outside the
    loop, so the body can apply them after reading the slot."""
    after = other_after_read(load)
    if after is not None:
        mask, other = after
        if mask is None or _defined_in(mask, body) or _defined_in(other, body):
            return False
    if "info" not in cache:
        cache["info"] = axis_info(cache["kernel"])
    info = cache["info"]
    mem = memory_operands(load)
    ptr = mem.pointer
    a = info.get(ptr)
    if a is None or a.rank == 0:
        return False
    unit = element_of(load.results[0].type).bytes
    d = contiguity_order(ptr, info)[0]
    run = a.contiguity[d]
    if mem.mask is not None:
        m = info.get(mem.mask)
        run = min(run, m.constancy[d] if m is not None and m.rank == a.rank else 1)
    nbytes = min(run * unit, a.divisibility[d], 16)
    return nbytes >= 4


def transposed_by(res: Value, body: Block, uses: dict[Value, list[Instr]]) -> Optional[Instr]:
    """The 2-D transpose (`permute (1, 0)`, `tl.trans`, `x.T`) that is the only user of a
    loaded tile, in the same loop body, or None. Such a load is pipelined as the load of
    the transposed tile: its pointers and mask are transposed instead, and the slot
    holds what the dot reads (a K-major B from an [N, K] block, as tensor-descriptor
    matmuls and attention's K^T write it)."""
    users = uses.get(res, [])
    if len(users) != 1:
        return None
    u = users[0]
    if u.op is not Op.PERMUTE or u not in body.instrs or tuple(u.attrs.order) != (1, 0):
        return None
    return u


def dot_operand(load: Instr, transposes: dict[Instr, Instr]) -> Value:
    """The value a pipelined load stands for in the body: its result, or the result of
    the transpose applied to it."""
    perm = transposes.get(load)
    return perm.results[0] if perm is not None else load.results[0]


def transposed_on_chip(load: Instr, loads: list[Instr], transposes: dict[Instr, Instr],
                       uses: dict[Value, list[Instr]], num_warps: int, capability: int, cache: dict) -> bool:
    """Whether a pipelined load of an 8-bit wgmma operand runs across the K-major order
    its slot must have (wgmma transposes 16-bit operands only): a row-major B, a
    column-major A. Its ring then stages the tile the way the copies run (16-byte
    cp.async, asynchronous like every other ring), and each iteration transposes the
    landed slot into a K-major buffer in shared memory (`local_copy`) for the dot; left
    alone, the lowering would copy it through registers with synchronous loads and
    stores that meet in few banks (`lower_shared._copy_through_registers`)."""
    if load.op is not Op.LOAD or load in transposes or capability < 90:
        return False
    res = load.results[0]
    t = res.type
    if not isinstance(t, TileType) or len(t.shape) != 2 or element_of(t).bytes != 1:
        return False
    readers = uses.get(res, [])
    if not readers or any(u.op is not Op.DOT for u in readers):
        return False
    pipelined = {dot_operand(ld, transposes) for ld in loads}
    operand = set()
    for dot in readers:
        ks = [k for k in (0, 1) if dot.operands[k] is res]
        if len(ks) != 1 or dot.operands[2] is res:
            return False
        operand.add(ks[0])
        choice = choose_mma(dot, num_warps, capability, dot.operands[1] in pipelined, dot.operands[0] in pipelined)
        if choice is None or choice.version != 3:
            return False
    if len(operand) != 1:
        return False
    k_dim = 0 if operand.pop() == 1 else 1  # B is [K, N], A is [M, K]
    if "info" not in cache:
        cache["info"] = axis_info(cache["kernel"])
    return contiguity_order(memory_operands(load).pointer, cache["info"])[0] != k_dim
