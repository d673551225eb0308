"""Rule of extern_elementwise: the library function named by the symbol, from
`ir.libdevice_numpy` (libdevice's `__nv_*` functions). A symbol with no reference
implementation (a user's own library) is a compile error naming it, and so is
inline_asm_elementwise (PTX, which only a GPU runs), except a one-instruction
approximation such as `tanh.approx.f32`, run as the libdevice function it approximates
(`ir.ptx_equivalents`)."""
from __future__ import annotations

import numpy as np

from ...errors import CompilationError
from ...ir.core import Instr
from ...ir.libdevice_numpy import IMPLEMENTATIONS
from ...ir.ops import Op
from ...ir.ptx_equivalents import libdevice_equivalent
from ...ir.types import element_of
from .compiler import Compiler
from .registry import Step, rule
from .values import storage_dtype


@rule(Op.EXTERN_ELEMENTWISE)
def extern_elementwise(ins: Instr, c: Compiler) -> Step:
    return _library_call(ins, ins.attrs.symbol, c)


def _library_call(ins: Instr, symbol: str, c: Compiler) -> Step:
    impl = IMPLEMENTATIONS.get(symbol)
    if impl is None:
        raise CompilationError(f"the interpreter has no implementation of the external function '{symbol}' "
                               "(it knows libdevice's __nv_* functions)", ins.loc)
    dt = storage_dtype(element_of(ins.result.type))
    slots = c.slots(ins.operands)
    o = c.slot(ins.result)

    def step(env):
        out = np.asarray(impl(*(env[s] for s in slots))).astype(dt, copy=False)
        env[o] = out[()] if out.ndim == 0 else out
    return step


@rule(Op.INLINE_ASM)
def inline_asm_elementwise(ins: Instr, c: Compiler) -> Step:
    symbol = libdevice_equivalent(ins)
    if symbol is not None:
        return _library_call(ins, symbol, c)
    raise CompilationError("tl.inline_asm_elementwise runs PTX assembly, which only an NVIDIA GPU executes: "
                           "the interpreter cannot run it (run the kernel on CUDA tensors)", ins.loc)
