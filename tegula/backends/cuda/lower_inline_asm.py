"""Lowering of `inline_asm_elementwise`: the user's PTX as LLVM inline assembly, run
once per `pack` of each thread's registers (Triton 3.6's rules; the frontend's
`language/inline_asm.py` states them).

A thread's registers of the result's layout are taken `pack` at a time (the last pack
padded with zeros when the count is not a multiple; its extra outputs are dropped).
Per execution, an operand or output of b < 32 bits has min(32 / b, pack) elements
packed into each 32-bit register (`register_groups`); every register is passed as the
LLVM type its constraint letter names (`r` i32, `h` i16, `l` i64, `f` float, `d`
double), bitcast or zero-extended from the elements' bits. The constraint string is
checked against those counts, so a wrong one is an error naming the kernel line, not
an LLVM failure. The host emulator (no PTX) refuses the op the same way.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import PointerType, element_of, parse_type
from ..llvm.intrinsics import inline_asm
from ..llvm.types import BFloatType, llvm_type
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

_REGISTER_TYPES = {"r": ir.IntType(32), "h": ir.IntType(16), "l": ir.IntType(64), "c": ir.IntType(8),
                   "f": ir.FloatType(), "d": ir.DoubleType(), "b": ir.IntType(1)}


def register_groups(bits: int, pack: int) -> tuple[int, int]:
    """(elements per register, registers per execution) of a value of `bits`-bit elements."""
    per = max(min(32 // bits, pack), 1) if bits < 32 else 1
    return per, -(-pack // per)


def _split_constraints(text: str) -> tuple[list[str], list[str]]:
    """The constraint string's outputs (`=r`...) and inputs; clobbers (`~{...}`) name
    no operand."""
    entries = [e.strip() for e in text.split(",") if e.strip() and not e.strip().startswith("~")]
    return [e for e in entries if e.startswith("=")], [e for e in entries if not e.startswith("=")]


def _register_type(entry: str) -> ir.Type:
    letter = entry.lstrip("=&+*")[:1]
    return _REGISTER_TYPES.get(letter, ir.IntType(32))


def _width(t: ir.Type) -> int:
    """The bits of a register or element type (half and bfloat 16, float 32, double 64)."""
    if isinstance(t, ir.IntType):
        return t.width
    if isinstance(t, (ir.HalfType, BFloatType)):
        return 16
    return 64 if isinstance(t, ir.DoubleType) else 32


def _fit(b: ir.IRBuilder, v: ir.Value, ty: ir.Type) -> ir.Value:
    """`v`'s bits as `ty` (same width: bitcast; narrower: zero-extended; wider: truncated)."""
    if v.type == ty:
        return v
    if isinstance(v.type, ir.PointerType):  # an address operand (`l`): its 64 bits
        v = b.ptrtoint(v, ir.IntType(64))
        if v.type == ty:
            return v
    src_int = v if isinstance(v.type, ir.IntType) else b.bitcast(v, ir.IntType(_width(v.type)))
    w_src, w_dst = _width(v.type), _width(ty)
    if w_src < w_dst:
        src_int = b.zext(src_int, ir.IntType(w_dst))
    elif w_src > w_dst:
        src_int = b.trunc(src_int, ir.IntType(w_dst))
    return src_int if isinstance(ty, ir.IntType) else b.bitcast(src_int, ty)


def _pack(b: ir.IRBuilder, elems: list[ir.Value], elem_ty: ir.Type, bits: int, reg_ty: ir.Type) -> ir.Value:
    if len(elems) == 1:
        return _fit(b, elems[0], reg_ty)
    vec = ir.Constant(ir.VectorType(elem_ty, len(elems)), None)
    for i, e in enumerate(elems):
        vec = b.insert_element(vec, e, ir.Constant(ir.IntType(32), i))
    return _fit(b, b.bitcast(vec, ir.IntType(bits * len(elems))), reg_ty)


def _unpack(b: ir.IRBuilder, reg: ir.Value, count: int, elem_ty: ir.Type, bits: int) -> list[ir.Value]:
    if count == 1:
        return [_fit(b, reg, elem_ty)]
    vec = b.bitcast(_fit(b, reg, ir.IntType(bits * count)), ir.VectorType(elem_ty, count))
    return [b.extract_element(vec, ir.Constant(ir.IntType(32), i)) for i in range(count)]


@handles(Op.INLINE_ASM)
def lower_inline_asm(lw: "KernelLowering", ins: Instr) -> None:
    a = ins.attrs
    if not lw.dev.inline_ptx:
        raise CompilationError("tl.inline_asm_elementwise runs PTX assembly, which only an NVIDIA GPU executes: "
                               "the host emulator cannot run it", ins.loc)
    b = lw.b
    pack = a.pack
    out_types = [element_of(parse_type(t)) for t in a.outputs]
    in_types = [element_of(o.type) for o in ins.operands]
    in_bits = [64 if isinstance(t, PointerType) else t.bits for t in in_types]
    out_groups = [register_groups(t.bits, pack) for t in out_types]
    in_groups = [register_groups(bits, pack) for bits in in_bits]
    outs, inputs = _split_constraints(a.constraints)
    want_out, want_in = sum(g[1] for g in out_groups), sum(g[1] for g in in_groups)
    if len(outs) != want_out or len(inputs) != want_in:
        raise CompilationError(
            f"inline_asm_elementwise: the constraints \"{a.constraints}\" name {len(outs)} output and "
            f"{len(inputs)} input registers, but with pack={pack} the outputs "
            f"({', '.join(map(str, out_types))}) need {want_out} and the arguments "
            f"({', '.join(map(str, in_types)) or 'none'}) {want_in} (elements narrower than 32 bits are packed "
            "into 32-bit registers)", ins.loc)
    out_reg_types = [_register_type(e) for e in outs]
    in_reg_types = [_register_type(e) for e in inputs]
    ret = out_reg_types[0] if len(out_reg_types) == 1 else ir.LiteralStructType(out_reg_types)
    r = ins.result
    lay = lw.plan.layouts.get(r)
    n = lay.n_regs if lay else 1
    operands = [lw.operand(ins, k) for k in range(len(ins.operands))]
    first_out = sum(g[1] for g in out_groups[:a.index])
    per_out, regs_out = out_groups[a.index]
    elem_out = llvm_type(out_types[a.index])
    result: list[ir.Value] = []
    for start in range(0, n, pack):
        args: list[ir.Value] = []
        slot = 0
        for regs, t, bits, (per, count) in zip(operands, in_types, in_bits, in_groups):
            ety = llvm_type(t)
            pad = ir.Constant(ety, None if isinstance(ety, ir.PointerType) else 0)
            elems = [(regs[i] if len(regs) > 1 else regs[0]) if i < n else pad for i in range(start, start + pack)]
            for j in range(count):
                chunk = elems[j * per:(j + 1) * per]
                chunk += [pad] * (per - len(chunk))
                args.append(_pack(b, chunk, ety, bits, in_reg_types[slot]))
                slot += 1
        call = inline_asm(b, ret, args, a.asm, a.constraints, side_effect=not a.is_pure)
        got: list[ir.Value] = []
        for j in range(regs_out):
            reg = call if len(out_reg_types) == 1 else b.extract_value(call, first_out + j)
            got += _unpack(b, reg, per_out, elem_out, out_types[a.index].bits)
        result += got[:min(pack, n - start)]
    lw.define(r, result)
