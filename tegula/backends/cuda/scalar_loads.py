"""A pipelined dot loop's scalar loads as one-element tile loads, which its rings prefetch.

A scalar read from global memory in every iteration of a dot loop (fla's gate at a
chunk's last row, `tl.load(g + last_idx * H + i_h)`, then scaling the state) is issued
where the iteration reaches it and waited for at once: its L2 latency is exposed every
iteration, however many stages the loop has. Triton's pipeliner copies such a scalar
with the iteration's tiles (a 4-byte cp.async), S-1 iterations ahead. The rings here
hold tiles, so `tile_scalar_loads` rewrites such a load into

    p1 = splat p : tile<1 x ptr>          (mask and other splatted alike)
    t  = load p1 : tile<1 x T>
    x  = reduce t {axis = 0} (maximum)    (one element: no combine runs)

and the loop's planner (`pipeline_plan`) prefetches `t` as any 1-D load its rings can
take (`_with_vector_loads`). A scalar narrower than 4 bytes is left alone (cp.async
moves 4, 8 or 16 bytes); the planner puts back every scalar load its plan does not
prefetch (one the loop also writes, one in a tile's address code), so a rewrite stays
only where a ring copies it.
"""
from __future__ import annotations

from typing import Callable, Collection, Optional

from ...ir import attrs as A
from ...ir.accessors import memory_operands
from ...ir.core import Block, Instr, Value
from ...ir.ops import Op
from ...ir.types import PointerType, ScalarType, TileType, element_of

_CP_ASYNC_MIN_BYTES = 4


def _is_scalar_global_load(ins: Instr) -> bool:
    if ins.op is not Op.LOAD or ins.attrs.volatile:
        return False
    res = ins.results[0].type
    if not isinstance(res, ScalarType):  # a tile, or a pointer read from memory
        return False
    ptr = element_of(memory_operands(ins).pointer.type)
    return isinstance(ptr, PointerType) and ptr.address_space == 1 and res.bytes >= _CP_ASYNC_MIN_BYTES


def _as_tile_load(ins: Instr) -> list[Instr]:
    """The splats, the one-element load and the reduction that replace `ins`; the
    reduction defines `ins`'s own result, so its users are unchanged."""
    elem = element_of(ins.results[0].type)
    splats = [Instr(Op.SPLAT, [v], [Value(TileType((1,), element_of(v.type)))], None, [], ins.loc)
              for v in ins.operands]
    load = Instr(Op.LOAD, [s.results[0] for s in splats], [Value(TileType((1,), elem))], ins.attrs, [], ins.loc)
    combine = Block()
    a, b = combine.add_arg(elem), combine.add_arg(elem)
    top = Instr(Op.MAXIMUM, [a, b], [Value(elem)], A.NanAttrs(), [], ins.loc)
    combine.instrs = [top, Instr(Op.YIELD, [top.results[0]], [], None, [], ins.loc)]
    reduce = Instr(Op.REDUCE, [load.results[0]], [ins.results[0]], A.ReduceAttrs(0), [combine], ins.loc)
    return [*splats, load, reduce]


def tile_scalar_loads(body: Block, only: Optional[Collection[Instr]] = None
                      ) -> tuple[dict[Instr, Instr], Callable[[], None]]:
    """Rewrite the scalar global loads at the top level of the loop body `body` (those
    of `only`, if given) in place. Returns each new one-element load's scalar load and
    the function that puts the body back as it was."""
    before = list(body.instrs)
    rewritten = [ins for ins in before if _is_scalar_global_load(ins) and (only is None or ins in only)]
    tiles: dict[Instr, Instr] = {}
    instrs: list[Instr] = []
    for ins in before:
        if ins in rewritten:
            new = _as_tile_load(ins)
            tiles[new[-2]] = ins  # (the load, before the reduction)
            instrs.extend(new)
        else:
            instrs.append(ins)
    body.instrs = instrs

    def undo() -> None:
        body.instrs = before
        for ins in rewritten:
            ins.results[0].owner = ins
    return tiles, undo
