"""Lowering of `atomic_rmw` and `atomic_cas`, one element at a time.

On the GPU each element is one predicated PTX `atom` (as Triton emits):
`@p atom.global.gpu.acq_rel.add.f32 old, [ptr], val;` with the scope and semantic of
the op; integers and floats travel as bit patterns of their width (`r`, `l`, `h`
registers). On the host emulator (no inline PTX) it is LLVM's `atomicrmw` / `cmpxchg`
under a branch.

Only one thread of each group that holds the same element performs its atomic
(`duplicate_free`): a scalar atomic, or one over a tile smaller than the CTA, must act
once, not once per copy. When the old values are used, that thread hands them to the
copies through shared memory (write, barrier, read), so every thread sees the value its
element's atomic returned. Masked-off lanes return 0.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import ScalarType, element_of
from ..llvm.intrinsics import inline_asm
from ..llvm.types import I16, I32, I64, byte_size, memory_type
from .checked import KIND_ATOMIC
from .convert import smem_load, smem_store
from .lower_memory import and_pred, check_site, checked_pred
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

_SEM = {"acq_rel": ".acq_rel", "acquire": ".acquire", "release": ".release", "relaxed": ".relaxed"}
_SCOPE = {"gpu": ".gpu", "cta": ".cta", "sys": ".sys"}
_LLVM_ORDER = {"acq_rel": "acq_rel", "acquire": "acquire", "release": "release", "relaxed": "monotonic"}
# cmpxchg's failure ordering may not release
_LLVM_FAIL_ORDER = {"acq_rel": "acquire", "acquire": "acquire", "release": "monotonic", "relaxed": "monotonic"}
_WORD = {16: (I16, "h"), 32: (I32, "r"), 64: (I64, "l")}


def _ptx_op(kind: str, elem: ScalarType, capability: int) -> str:
    """The `.op.type` part of the PTX instruction."""
    bits = elem.bits
    if kind == "fadd":
        if elem.name == "bf16" and capability < 90:
            raise CompilationError("tl.atomic_add on bfloat16 needs sm_90 or newer (PTX atom.add.noftz.bf16); "
                                   f"this target is sm_{capability}")
        return {"f16": ".add.noftz.f16", "bf16": ".add.noftz.bf16", "f32": ".add.f32", "f64": ".add.f64"}[elem.name]
    if kind == "add":
        return f".add.u{bits}"
    if kind in ("max", "min"):
        return f".{kind}.{'s' if elem.is_signed else 'u'}{bits}"
    if kind in ("and", "or", "xor"):
        return f".{kind}.b{bits}"
    if kind == "xchg":
        return f".exch.b{bits}"
    assert kind == "cas", kind
    return f".cas.b{bits}"


def _as_word(b: ir.IRBuilder, v: ir.Value, word: ir.Type) -> ir.Value:
    return v if v.type == word else b.bitcast(v, word)


def _ptx_atomic(lw: "KernelLowering", op: str, attrs: Any, ptr: ir.Value, operands: list[ir.Value],
                pred: Optional[ir.Value], elem: ScalarType) -> ir.Value:
    b = lw.b
    word, letter = _WORD[elem.bits]
    args: list[ir.Value] = [ptr] + [_as_word(b, v, word) for v in operands]
    cons = ["=" + letter, "l"] + [letter] * len(operands)
    srcs = ", ".join(f"${2 + i}" for i in range(len(operands)))
    guard = ""
    if pred is not None:
        args.append(pred)
        cons.append("b")
        guard = f"@${len(args)} "
    # Triton's spellings, which its tests and users grep the PTX for: read-modify-writes
    # put the scope first (`atom.global.gpu.acq_rel.add`), compare-and-swap the semantic
    # (`atom.global.acq_rel.gpu.cas`); ptxas takes both orders
    qualifiers = (_SEM[attrs.sem] + _SCOPE[attrs.scope] if op.startswith(".cas")
                  else _SCOPE[attrs.scope] + _SEM[attrs.sem])
    text = (f"mov.b{elem.bits} $0, 0;\n\t"
            f"{guard}atom.global{qualifiers}{op} $0, [$1], {srcs};")
    old = inline_asm(b, word, args, text, ",".join(cons) + ",~{memory}", side_effect=True)
    mt = memory_type(elem)
    return old if mt == word else b.bitcast(old, mt)


def _host_atomic(lw: "KernelLowering", kind: str, attrs: Any, ptr: ir.Value, operands: list[ir.Value],
                 pred: Optional[ir.Value], elem: ScalarType) -> ir.Value:
    b = lw.b
    mt = memory_type(elem)

    def emit() -> ir.Value:
        if kind == "cas":
            pair = b.cmpxchg(ptr, _as_word(b, operands[0], _WORD[elem.bits][0]),
                             _as_word(b, operands[1], _WORD[elem.bits][0]),
                             _LLVM_ORDER[attrs.sem], _LLVM_FAIL_ORDER[attrs.sem])
            old = b.extract_value(pair, 0)
            return old if old.type == mt else b.bitcast(old, mt)
        op = {"max": "max" if elem.is_signed else "umax", "min": "min" if elem.is_signed else "umin"}.get(kind, kind)
        return b.atomic_rmw(op, ptr, operands[0], _LLVM_ORDER[attrs.sem])

    if pred is None:
        return emit()
    start = b.basic_block
    with b.if_then(pred):
        got = emit()
        done = b.basic_block
    phi = b.phi(mt)
    phi.add_incoming(got, done)
    phi.add_incoming(ir.Constant(mt, 0), start)
    return phi


def _used(lw: "KernelLowering", v: Value) -> bool:
    return any(v in ins.operands for ins in lw.kernel.walk())


def _share_old_values(lw: "KernelLowering", ins: Instr, old: list[ir.Value], elem: ScalarType,
                      owner: ir.Value) -> list[ir.Value]:
    """Give every copy of an element the old value its owning thread got."""
    lay = lw.plan.required(ins, 0)
    b = lw.b
    size = byte_size(elem)
    numel = 1 if lay is None else lay.numel
    lw.scratch(numel * size)
    flats = [ir.Constant(I32, 0)] if lay is None else [lw.element_flat(lay, r) for r in range(len(old))]
    for v, flat in zip(old, flats):
        with b.if_then(owner):
            smem_store(lw, b.mul(flat, ir.Constant(I32, size)), [v], elem)
    lw.smem_written()
    return [smem_load(lw, b.mul(flat, ir.Constant(I32, size)), 1, elem)[0] for flat in flats]


@handles(Op.ATOMIC_RMW, Op.ATOMIC_CAS)
def lower_atomic(lw: "KernelLowering", ins: Instr) -> None:
    attrs = ins.attrs
    rmw = ins.op is Op.ATOMIC_RMW
    kind = attrs.kind if rmw else "cas"
    ptrs = lw.operand(ins, 0)
    operand_regs = [lw.operand(ins, 1)] if rmw else [lw.operand(ins, 1), lw.operand(ins, 2)]
    masks = lw.operand(ins, 2) if rmw and attrs.has_mask else None
    elem = element_of(ins.operands[0].type).pointee
    emit: Callable[..., ir.Value]
    if lw.dev.inline_ptx:
        op = _ptx_op(kind, elem, lw.capability)

        def emit(ptr, operands, pred):
            return _ptx_atomic(lw, op, attrs, ptr, operands, pred, elem)
    else:
        def emit(ptr, operands, pred):
            return _host_atomic(lw, kind, attrs, ptr, operands, pred, elem)
    once = lw.duplicate_free(lw.plan.required(ins, 0))
    site = check_site(lw, ins, "atomic")
    old = []
    for i, ptr in enumerate(ptrs):
        pred = and_pred(lw.b, masks[i] if masks is not None else None, once)
        pred = checked_pred(lw, ins, KIND_ATOMIC, ptr, 1, elem, pred, site)
        old.append(emit(ptr, [regs[i] for regs in operand_regs], pred))
    if once is not None and _used(lw, ins.results[0]):
        old = _share_old_values(lw, ins, old, elem, once)
    lw.define(ins.results[0], old)
