"""The table of op lowerings of the CUDA backend: `@handles(Op.X)` registers a function
`(lowering, instr) -> None` that emits LLVM IR for one instruction. Each `lower_*`
module fills its part; `lower_kernel` imports them all. Ops without a handler are
rewritten by a pass first (`REWRITTEN_BEFORE_LOWERING`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ...ir.core import Instr
from ...ir.ops import BLOCK_POINTER_OPS, DESCRIPTOR_OPS, Op

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

Handler = Callable[["KernelLowering", Instr], None]
HANDLERS: dict[Op, Handler] = {}

# ops the passes `cuda.lower_block_pointers` and `cuda.lower_descriptors` rewrite into
# other ops before the lowering sees them, unless they have a handler here and the pass
# leaves them to it (TMA for descriptor loads)
REWRITTEN_BEFORE_LOWERING = DESCRIPTOR_OPS | BLOCK_POINTER_OPS


def handles(*ops: Op) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for op in ops:
            assert op not in HANDLERS, f"two CUDA lowerings of {op}"
            HANDLERS[op] = fn
        return fn
    return register
