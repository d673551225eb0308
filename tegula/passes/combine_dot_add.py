"""combine_dot_add: `c + dot(a, b, 0)` becomes `dot(a, b, c)`.

`acc += tl.dot(a, b)` is written as an add of a fresh product to the accumulator; as
Triton's combine pass does (`AddFOp/AddIOp(DotOp(a, b, 0), d) -> DotOp(a, b, d)`), the
accumulator goes into the dot, so the tensor cores accumulate into it in place: no
second accumulator-sized tile of registers for the product (attention's backward
carries dK and dV, 64 registers a thread each at 4 warps, beside its products) and no
separate add.

Expects: verified IR. Guarantees: verified IR; a `dot` whose accumulator is a zero
constant, that may not accumulate imprecisely (`max_num_imprecise_acc` unset or 0: an
fp8 dot on Hopper keeps its exact running sum outside), whose only use is an `add` in
the same block whose other operand has the dot's type, is replaced by one `dot` at the
add's place (where both the operands of the old dot and the other addend are defined)
taking over the add's result. For integer dots the result is the same; for
floating-point ones the sum is rounded once instead of twice (f32 inputs), as on the
GPU, where the accumulator is added inside the tensor-core instruction.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from ..ir.core import Block, Instr, Kernel
from ..ir.ops import Op
from .ir_utils import uniform_constant_of, use_counts


def combine_dot_add(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Fold each qualifying `add(dot(a, b, 0), c)` (either order) into `dot(a, b, c)`."""
    uses = use_counts(kernel.body)
    _block(kernel.body, uses)
    return kernel


def _block(block: Block, uses: Counter) -> None:
    here = {id(ins) for ins in block.instrs}
    out: list[Instr] = []
    dead: set[int] = set()
    for ins in block.instrs:
        for region in ins.regions:
            _block(region, uses)
        combined = _combined(ins, here, uses) if ins.op is Op.ADD else None
        if combined is None:
            out.append(ins)
            continue
        dot, new = combined
        dead.add(id(dot))
        out.append(new)
    block.instrs = [i for i in out if id(i) not in dead]


def _combined(add: Instr, here: set[int], uses: Counter) -> Optional[tuple[Instr, Instr]]:
    """(the dot folded away, the dot replacing `add`), or None."""
    for k in (0, 1):
        prod, other = add.operands[k], add.operands[1 - k]
        dot = prod.owner
        if not (isinstance(dot, Instr) and dot.op is Op.DOT and id(dot) in here):
            continue
        if uses[prod] != 1 or uniform_constant_of(dot.operands[2]) != 0:
            continue
        if not (other.type == prod.type == add.results[0].type):
            continue
        if getattr(dot.attrs, "max_num_imprecise_acc", None):
            # an fp8 dot that may accumulate imprecisely (Hopper's default): the running
            # sum stays an exact f32 add outside it, as Triton's pattern requires
            continue
        return dot, Instr(Op.DOT, [dot.operands[0], dot.operands[1], other], list(add.results), dot.attrs, [],
                          dot.loc)
    return None
