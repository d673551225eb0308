"""The libdevice function that a one-instruction PTX approximation computes, so the host
backends can run kernels that use the common `tl.inline_asm_elementwise` idioms
(`tanh.approx.f32 $0, $1;`, `ex2.approx.f32`, `sin.approx.f32`, ... — mamba-3's fast
math, FlashAttention-style exp2) instead of refusing them.

The host computes the function the instruction approximates, correctly rounded (as the
CUDA emulator does for `ex2.approx`), not the instruction's own error; `.ftz` is not
modelled. Anything else — several instructions, other types, packed registers — stays
GPU-only, with the backends' error naming the kernel line.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

from .attrs import InlineAsmAttrs
from .core import Instr
from .types import F32, Type, element_of

# PTX instruction (without `.approx[.ftz].f32`) -> the libdevice function it approximates
_APPROX_F32 = {
    "sin": "__nv_sinf",
    "cos": "__nv_cosf",
    "tanh": "__nv_tanhf",
    "ex2": "__nv_exp2f",
    "lg2": "__nv_log2f",
    "rcp": "__nv_frcp_rn",
    "sqrt": "__nv_sqrtf",
    "rsqrt": "__nv_rsqrtf",
}

# one instruction, result $0, operand $1, an optional trailing `;`
_ONE_INSTRUCTION = re.compile(r"^\s*(\w+)\.approx(?:\.ftz)?\.f32\s+\$0\s*,\s*\$1\s*;?\s*$")


def libdevice_equivalent(ins: Instr) -> Optional[str]:
    """The libdevice symbol computing what the inline_asm_elementwise `ins` does, or None
    when it is not one of the f32 approximation instructions above."""
    return equivalent_of(ins.attrs, [o.type for o in ins.operands], ins.result.type)


def equivalent_of(attrs: InlineAsmAttrs, operand_types: Sequence[Type], result_type: Type) -> Optional[str]:
    """`libdevice_equivalent` from the op's parts: one of the instructions above applied to
    one f32 operand, one element per execution (pack 1, constraints `=f,f`), else None."""
    m = _ONE_INSTRUCTION.match(attrs.asm)
    if m is None or attrs.pack != 1 or attrs.constraints.replace(" ", "") != "=f,f":
        return None
    if attrs.outputs != ("f32",) or len(operand_types) != 1:
        return None
    if element_of(operand_types[0]) != F32 or element_of(result_type) != F32:
        return None
    return _APPROX_F32.get(m.group(1))
