"""Lowering of `device_print` (through `vprintf`, one line per element with the program
id and the element's index, each element once even when several threads hold it) and
`device_assert` (only with debug on: in checked mode the failure is recorded in the
error buffer and raised as `DeviceAssertionError` after the launch; otherwise
`__assertfail` prints and traps as CUDA's `assert` does).

The printed lines are Triton's, character for character, and the interpreter's
(`interpreter/rules_debug.py`): `pid (X, Y, Z) idx (I, J)<prefix>(operand N) <value>`,
index fields padded to ceil(log10(dim)) digits, `(operand N) ` only when several
operands are printed, hex values zero-padded to the type's width; without operands
`pid (X, Y, Z)<prefix>`, once per program (Triton prints it from every thread). The
order of the lines is the GPU's (unspecified)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import F32, PointerType, element_of, shape_of
from ..llvm import casts
from ..llvm.types import F64, I32, I64
from .checked import KIND_ASSERT
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


def _format(b: ir.IRBuilder, lw: "KernelLowering", v: ir.Value, elem: Any,
            hex_: bool) -> tuple[str, ir.Value]:
    """(printf conversion, argument) of one element."""
    if isinstance(elem, PointerType):
        return "%p", v
    digits = elem.bits // 4
    pad = f"0{digits}" if digits > 1 else ""  # hex is zero-padded to the type's width
    if elem.is_float:
        if hex_:
            bits = elem.bits if not elem.is_fp8 else 8
            iv = b.bitcast(v, ir.IntType(bits)) if not elem.is_fp8 else v
            return (f"0x%{pad}llx", b.zext(iv, I64)) if bits == 64 else (f"0x%{pad}x", b.zext(iv, I32))
        wide = casts.convert(b, lw.target, v, elem, F32) if elem.name != "f64" else v
        return "%f", b.fpext(wide, F64) if elem.name != "f64" else wide
    if elem.bits == 64:
        return (f"0x%{pad}llx" if hex_ else ("%lld" if elem.is_signed else "%llu")), v
    if hex_:
        return f"0x%{pad}x", b.zext(v, I32) if v.type.width < 32 else v
    if elem.is_signed:
        return "%d", b.sext(v, I32) if v.type.width < 32 else v
    return "%u", b.zext(v, I32) if v.type.width < 32 else v


def _index_field(dim: int) -> str:
    """The printf field of one index: as wide as ceil(log10(dim)) digits (Triton's)."""
    width = math.ceil(math.log10(dim)) if dim > 0 else 0
    return f"%{width}u" if width > 1 else "%u"


@handles(Op.DEVICE_PRINT)
def lower_print(lw: "KernelLowering", ins: Instr) -> None:
    b = lw.b
    prefix = ins.attrs.prefix.replace("%", "%%")
    pid = [lw.dev.sreg(b, f"ctaid.{a}") for a in "xyz"]
    many = len(ins.operands) > 1
    if not ins.operands:
        # once per program, as the interpreter prints it (not once per thread)
        with b.if_then(lw.duplicate_free(None)):
            lw.dev.vprintf(b, lw.pb, "pid (%u, %u, %u)" + prefix + "\n", pid)
        return
    for k, v in enumerate(ins.operands):
        t = lw.tile(v)
        elem = element_of(v.type)
        label = prefix + (f"(operand {k}) " if many else "")
        fields = ", ".join(_index_field(d) for d in shape_of(v.type))
        once = lw.duplicate_free(t.layout)
        for r, reg in enumerate(t.regs):
            idx: list[ir.Value] = lw.element_coords(t.layout, r) if t.layout is not None else []
            conv, arg = _format(b, lw, reg, elem, ins.attrs.hex)
            fmt = "pid (%u, %u, %u) idx (" + fields + ")" + label + conv + "\n"
            if once is None:
                lw.dev.vprintf(b, lw.pb, fmt, pid + idx + [arg])
            else:
                with b.if_then(once):
                    lw.dev.vprintf(b, lw.pb, fmt, pid + idx + [arg])


@handles(Op.DEVICE_ASSERT)
def lower_assert(lw: "KernelLowering", ins: Instr) -> None:
    if not lw.debug:
        return
    b = lw.b
    t = lw.tile(ins.operands[0])
    fail = None
    for reg in t.regs:
        bad = b.not_(reg)
        fail = bad if fail is None else b.or_(fail, bad)
    if lw.checked is not None:
        site = lw.checked.site("assert", ins.loc, ins.attrs.message)
        lw.checked.report(lw, KIND_ASSERT, site, fail)
        return
    with b.if_then(fail, likely=False):
        lw.dev.assertfail(b, ins.attrs.message, ins.loc.file, ins.loc.line, lw.kernel.name)
