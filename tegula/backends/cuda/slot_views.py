"""A shared-memory slot read by wgmma both as it is and through a 2-D transpose.

Attention's backward reads Q^T as `dot(k, qT)` and `dot(dsT, tl.trans(qT))`, and dO as
`dot(pT, do)` and `dot(v, tl.trans(do))` (Triton's tutorial 06). For 16-bit operands
wgmma reads a slot either way round — its descriptors take the operand K-major or
MN-major (the transpose immediates) — and the NVMMA layout of a tile stored along its
rows is, element for element, the transposed NVMMA layout of its transpose. So one ring
serves both dots: the direct dot reads the slot, the transposed one reads a *view* of
it (the same bytes, the offsets map composed with the transposition, the copy
direction flipped), as Triton's `memdesc_trans` does. Without it the pipeliner gave the
transpose a second copy of the load (`pipeline_split`): a second ring and a second
read of the tile from L2 in every iteration.

This module answers, for the pipeliner, the layout assignment and the lowering alike:
- `viewed_both_ways(res, body, uses)`: the transpose of a loaded tile whose other
  users are dots, when every dot on either side runs on wgmma with 16-bit operands;
- `slot_read(v)`: the `local_load` a dot operand reads in place, and whether through
  a transpose;
- `transposed_offsets(offsets, shape)`: a slot's offsets map seen through the
  transpose.
"""
from __future__ import annotations

from typing import Optional

from ...ir.core import Block, Instr, Value
from ...ir.ops import Op
from ...ir.types import element_of, shape_of
from .linear_layout import BitMap, compose, permute_view
from .mma import choose_mma

TRANSPOSE = (1, 0)


def _is_transpose(ins: Instr) -> bool:
    return ins.op is Op.PERMUTE and tuple(ins.attrs.order) == TRANSPOSE


def slot_read(v: Value) -> Optional[tuple[Instr, bool]]:
    """(the local_load, through a transpose?) when `v` is a slot read, directly or
    through a 2-D transpose; else None."""
    owner = v.owner
    if not isinstance(owner, Instr):
        return None
    if owner.op is Op.LOCAL_LOAD:
        return owner, False
    if _is_transpose(owner):
        src = owner.operands[0].owner
        if isinstance(src, Instr) and src.op is Op.LOCAL_LOAD:
            return src, True
    return None


def transposed_offsets(offsets: BitMap, shape: tuple[int, ...]) -> BitMap:
    """The offsets map of a slot of `shape` ([R, C]) read as its transpose ([C, R]):
    the element (c, r) of the view lives where (r, c) does."""
    return compose(offsets, permute_view(tuple(shape), TRANSPOSE))


def _dot_readers(v: Value, body: Block, uses: dict[Value, list[Instr]]) -> Optional[list[Instr]]:
    users = uses.get(v, [])
    if not users or any(u.op is not Op.DOT or u not in body.instrs or u.operands[2] is v for u in users):
        return None
    return users


def viewed_both_ways(res: Value, body: Block, uses: dict[Value, list[Instr]], num_warps: int,
                     capability: int) -> Optional[Instr]:
    """The 2-D transpose of the loaded tile `res` when its users are dots of `body`
    and that one transpose, whose users are dots of `body` too, and every one of these
    dots runs on wgmma with its operand in a slot (16-bit operands: wgmma transposes
    only those); else None. One dot may read both (fla's `dot(k, tl.trans(k))`, a Gram
    matrix): its A and B descriptors then point into the same slot, each read in
    place as its view says."""
    if capability < 90 or len(shape_of(res.type)) != 2 or element_of(res.type).bytes != 2:
        return None
    users = uses.get(res, [])
    perms = [u for u in users if _is_transpose(u) and u in body.instrs]
    if len(perms) != 1:
        return None
    direct = [u for u in users if u is not perms[0]]
    readers = (_dot_readers(res, body, {res: direct}) if direct else None,
               _dot_readers(perms[0].results[0], body, uses))
    if readers[0] is None or readers[1] is None:
        return None
    for dot in readers[0] + readers[1]:
        choice = choose_mma(dot, num_warps, capability, b_in_shared=True, a_in_shared=True)
        if choice is None or choice.version != 3:
            return None
    return perms[0]
