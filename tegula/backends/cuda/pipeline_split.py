"""Loads read both as loaded and transposed, split in two for the software pipeliner.

A tile loaded in a loop body may feed dots both directly and through a 2-D transpose —
attention's backward reads Q^T as `dot(k, qT)` and `dot(dsT, tl.trans(qT))`, and dO as
`dot(pT, do)` and `dot(v, tl.trans(do))` (Triton's tutorial 06). The pipeliner
(`pipeline_loops`) gives each load one ring of slots that holds the tile the dots read,
so such a load was not taken at all: its dots read registers and ran on mma.sync with
no copies in flight (the tutorial's backward at 0.25-0.33x Triton on an H100).

`split_transposed_uses` gives the transpose its own copy of the load (same pointers,
mask and `other`), so the pipeliner takes two candidates: the load as it is, for the
direct dots, and the copy, whose slot holds the transposed tile (its pointers
transposed, as for a load whose only user is a transpose). The cost is a second copy
of the tile from L2 and a second ring in shared memory; a loop the pipeliner then
leaves alone gets its original load back (`undo`), so it never loads twice. Where
every such dot runs on wgmma (16-bit operands, sm_90a) nothing is split: one ring is
read directly and through a transposed view (`slot_views`), also by one dot reading
both (`dot(k, tl.trans(k))`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.clone import clone_instr
from ...ir.core import Block, Instr, Value
from ...ir.ops import Op
from ...ir.types import TileType
from .slot_views import viewed_both_ways


@dataclass
class Split:
    load: Instr        # the original load: its direct users keep it
    copy: Instr        # the copy, inserted right after it, read by the transpose
    transpose: Instr   # the 2-D transpose, now of the copy


def _reads_as_dot_operand(v: Value, user: Instr) -> bool:
    """Whether `user` is a dot reading `v` as A or B (not as its accumulator)."""
    return user.op is Op.DOT and v in user.operands[:2] and user.operands[2] is not v


def split_transposed_uses(body: Block, uses: dict[Value, list[Instr]], num_warps: int,
                          capability: int) -> list[Split]:
    """Split every 2-D load of `body` whose users are dots of the body reading it as an
    operand and one transpose of it whose users are such dots too — unless all those
    dots run on wgmma, which reads one slot both ways (`slot_views`)."""
    splits = []
    for ins in list(body.instrs):
        if ins.op not in (Op.LOAD, Op.DESCRIPTOR_LOAD) or len(ins.results) != 1:
            continue
        res = ins.results[0]
        if not isinstance(res.type, TileType) or len(res.type.shape) != 2:
            continue
        if viewed_both_ways(res, body, uses, num_warps, capability) is not None:
            continue
        users = uses.get(res, [])
        perms = [u for u in users if u.op is Op.PERMUTE and tuple(u.attrs.order) == (1, 0)]
        direct = [u for u in users if u not in perms]
        if len(perms) != 1 or not direct or any(u not in body.instrs for u in users):
            continue
        perm = perms[0]
        if not all(_reads_as_dot_operand(res, u) for u in direct):
            continue
        if not all(u in body.instrs and _reads_as_dot_operand(perm.results[0], u)
                   for u in uses.get(perm.results[0], [])):
            continue
        copy = clone_instr(ins, {})
        body.instrs.insert(body.instrs.index(ins) + 1, copy)
        perm.operands = [copy.results[0] if o is res else o for o in perm.operands]
        splits.append(Split(ins, copy, perm))
    return splits


def undo(body: Block, splits: list[Split]) -> None:
    """Give the transposes their original loads back and drop the copies."""
    for s in splits:
        s.transpose.operands = [s.load.results[0] if o is s.copy.results[0] else o for o in s.transpose.operands]
        body.instrs.remove(s.copy)
