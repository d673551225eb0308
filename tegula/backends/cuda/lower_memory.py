"""Lowering of global loads and stores.

Registers that hold consecutive elements (the layout's leading register bits along the
fastest dimension, as wide as the axis analysis allows: `plan.vec`) move as one vector
access of up to 16 bytes. Unpredicated accesses without cache hints are plain LLVM
vector loads/stores, which LLVM can schedule and combine. Masked ones (and those with
cache modifiers, eviction policies or `volatile`) are inline PTX, as Triton does:
`@p ld.global.v4.b32` predicates the access without a branch, the `other` values are
moved into the destination registers first, and the words are reinterpreted as the
element type afterwards (the instructions are the device's `ld_global` / `st_global`).
Stores from layouts where several threads hold the same element are predicated so that
only one of them writes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import llvmlite.ir as ir

from ...ir.accessors import memory_operands
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import PointerType, ScalarType, element_of
from ...passes import contiguity_order
from ..llvm.types import I8, I16, I32, I64, byte_size, memory_type
from .checked import KIND_LOAD, KIND_STORE
from .linear_layout import LinearLayout, dim_fields
from .nvvm import access_words
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

_EVICT = {"evict_first": ".L1::evict_first", "evict_last": ".L1::evict_last"}
_LOAD_CACHE = {".ca", ".cg", ".cv", ".cs", ".lu"}
_STORE_CACHE = {".wb", ".cg", ".cs", ".wt"}


def access_width(lw: "KernelLowering", ins: Instr, lay: Optional[LinearLayout]) -> int:
    """Elements per vector access: the plan's width, bounded by how many leading
    registers of the layout hold consecutive elements of the dimension that width is
    along (the pointers' most contiguous one, `memory_access`). Registers running
    along another dimension are no vector: a column-major A loaded in wgmma's
    register-A layout, whose register pairs run along K, was read as two elements
    along M."""
    vec = lw.plan.vec.get(ins, 1)
    if lay is None or not lay.reg or vec == 1:
        return 1
    first = lay.reg[0]
    if first & (first - 1):
        return 1
    bit = first.bit_length() - 1
    ptr = memory_operands(ins).pointer
    axis = contiguity_order(ptr, lw.plan.axis)[0] if ptr is not None else None
    for d, (s, n) in enumerate(dim_fields(lay.shape)):
        if s == bit:
            if axis is not None and d != axis:
                return 1
            k = 0
            while k < len(lay.reg) and k < n and lay.reg[k] == 1 << (s + k):
                k += 1
            return min(vec, 1 << k)
    return 1


def _register_type(elem: Any) -> ir.Type:
    """What a value is moved as: pointers as i64 (vectors of pointers cannot be
    reinterpreted as words)."""
    return I64 if isinstance(elem, PointerType) else memory_type(elem)


def _to_memory(b: ir.IRBuilder, v: ir.Value, elem: Any) -> ir.Value:
    if isinstance(elem, PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(elem, ScalarType) and elem.is_bool:
        return b.zext(v, I8)
    return v


def _from_memory(b: ir.IRBuilder, v: ir.Value, elem: Any) -> ir.Value:
    if isinstance(elem, PointerType):
        return b.inttoptr(v, memory_type(elem))
    if isinstance(elem, ScalarType) and elem.is_bool:
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    return v


def _pack(b: ir.IRBuilder, vals: list[ir.Value], mt: ir.Type, wt: ir.Type, nw: int) -> list[ir.Value]:
    if len(vals) == 1 and mt == wt:
        return vals
    if len(vals) == 1 and isinstance(mt, ir.IntType) and mt.width == 8:
        return [b.zext(vals[0], I16)]
    vec = ir.Constant(ir.VectorType(mt, len(vals)), ir.Undefined)
    for i, x in enumerate(vals):
        vec = b.insert_element(vec, x, ir.Constant(I32, i))
    words = b.bitcast(vec, ir.VectorType(wt, nw))
    return [b.extract_element(words, ir.Constant(I32, i)) for i in range(nw)]


def _unpack(b: ir.IRBuilder, words: list[ir.Value], mt: ir.Type, count: int, wt: ir.Type) -> list[ir.Value]:
    if count == 1 and mt == wt and len(words) == 1:
        return words
    if count == 1 and isinstance(mt, ir.IntType) and mt.width == 8:
        return [b.trunc(words[0], I8)]
    vec = ir.Constant(ir.VectorType(wt, len(words)), ir.Undefined)
    for i, w in enumerate(words):
        vec = b.insert_element(vec, w, ir.Constant(I32, i))
    vals = b.bitcast(vec, ir.VectorType(mt, count))
    return [b.extract_element(vals, ir.Constant(I32, i)) for i in range(count)]


def _qualifiers(attrs: Any, allowed: set[str]) -> str:
    """PTX qualifiers for the cache hints; a cache operator (.cg...) and an L1 eviction
    priority are alternative forms of ld/st in PTX, so the operator wins."""
    q = attrs.cache_modifier if attrs.cache_modifier in allowed else ""
    return q or _EVICT.get(attrs.eviction_policy, "")


def _plain_load(lw: "KernelLowering", ptr: ir.Value, count: int, elem: Any) -> list[ir.Value]:
    b = lw.b
    mt = _register_type(elem)
    ty = mt if count == 1 else ir.VectorType(mt, count)
    v = b.load(ptr, typ=ty, align=lw.dev.access_alignment(b, ptr, count * byte_size(elem), "global"))
    vals = [v] if count == 1 else [b.extract_element(v, ir.Constant(I32, i)) for i in range(count)]
    return [_from_memory(b, x, elem) for x in vals]


def emit_load(lw: "KernelLowering", ptr: ir.Value, count: int, elem: Any, pred: Optional[ir.Value],
              others: Optional[list[ir.Value]], attrs: Any) -> list[ir.Value]:
    b = lw.b
    mt = _register_type(elem)
    nbytes = count * byte_size(elem)
    quals = _qualifiers(attrs, _LOAD_CACHE) if attrs is not None else ""
    volatile = bool(attrs is not None and attrs.volatile)
    if pred is None and not quals and not volatile:
        return _plain_load(lw, ptr, count, elem)
    ow = None
    if pred is not None:
        if others is None:
            zero = ir.Constant(mt, 0) if isinstance(mt, ir.IntType) else ir.Constant(mt, 0.0)
            others = [zero] * count
        wt, nw = access_words(nbytes)
        ow = _pack(b, [_to_memory(b, o, elem) for o in others], mt, wt, nw)
    words = lw.dev.ld_global(b, ptr, nbytes, pred, ow, quals, volatile)
    return [_from_memory(b, x, elem) for x in _unpack(b, words, mt, count, words[0].type)]


def emit_store(lw: "KernelLowering", ptr: ir.Value, vals: list[ir.Value], elem: Any,
               pred: Optional[ir.Value], attrs: Any) -> None:
    b = lw.b
    mt = _register_type(elem)
    count = len(vals)
    nbytes = count * byte_size(elem)
    quals = _qualifiers(attrs, _STORE_CACHE) if attrs is not None else ""
    mem = [_to_memory(b, v, elem) for v in vals]
    if pred is None and not quals:
        align = lw.dev.access_alignment(b, ptr, nbytes, "global")
        if count == 1:
            b.store(mem[0], ptr, align=align)
            return
        vec = ir.Constant(ir.VectorType(mt, count), ir.Undefined)
        for i, x in enumerate(mem):
            vec = b.insert_element(vec, x, ir.Constant(I32, i))
        b.store(vec, ptr, align=align)
        return
    wt, nw = access_words(nbytes)
    lw.dev.st_global(b, ptr, nbytes, _pack(b, mem, mt, wt, nw), pred, quals)


def and_pred(b: ir.IRBuilder, x: Optional[ir.Value], y: Optional[ir.Value]) -> Optional[ir.Value]:
    if x is None:
        return y
    if y is None:
        return x
    return b.and_(x, y)


def checked_pred(lw: "KernelLowering", ins: Instr, kind: int, ptr: ir.Value, count: int, elem: Any,
             pred: Optional[ir.Value], site: Optional[int]) -> Optional[ir.Value]:
    """In checked mode, mask off (and report) an access outside its array."""
    ck = lw.checked
    if ck is None or site is None:
        return pred
    got = ck.bounds(lw, ins.operands[0], ptr, count * byte_size(elem))
    if got is None:
        return pred
    ok, off = got
    b = lw.b
    fail = b.not_(ok) if pred is None else b.and_(pred, b.not_(ok))
    elems = b.sdiv(off, ir.Constant(I64, byte_size(elem)))
    ck.report(lw, kind, site, fail, elems)
    return and_pred(b, pred, ok)


def check_site(lw: "KernelLowering", ins: Instr, kind: str) -> Optional[int]:
    ck = lw.checked
    if ck is None or ins.operands[0] not in ck.origins:
        return None
    name = lw.kernel.arg_names[ck.origins[ins.operands[0]]]
    return ck.site(kind, ins.loc, name)


@handles(Op.LOAD)
def lower_load(lw: "KernelLowering", ins: Instr) -> None:
    attrs = ins.attrs
    k = 1
    mask_i = k if attrs.has_mask else None
    k += int(attrs.has_mask)
    other_i = k if attrs.has_other else None
    ptrs = lw.operand(ins, 0)
    masks = lw.operand(ins, mask_i) if mask_i is not None else None
    others = lw.operand(ins, other_i) if other_i is not None else None
    res = ins.results[0]
    elem = element_of(res.type)
    lay = lw.plan.layouts.get(res)
    vec = access_width(lw, ins, lay)
    site = check_site(lw, ins, "load")
    out: list[ir.Value] = []
    for g in range(0, len(ptrs), vec):
        pred = masks[g] if masks is not None else None
        pred = checked_pred(lw, ins, KIND_LOAD, ptrs[g], vec, elem, pred, site)
        oth = others[g:g + vec] if others is not None else None
        out += emit_load(lw, ptrs[g], vec, elem, pred, oth, attrs)
    lw.define(res, out)


@handles(Op.STORE)
def lower_store(lw: "KernelLowering", ins: Instr) -> None:
    attrs = ins.attrs
    ptrs = lw.operand(ins, 0)
    vals = lw.operand(ins, 1)
    masks = lw.operand(ins, 2) if attrs.has_mask else None
    elem = element_of(ins.operands[1].type)
    lay = lw.plan.required(ins, 0)
    vec = access_width(lw, ins, lay)
    once = lw.duplicate_free(lay)
    site = check_site(lw, ins, "store")
    for g in range(0, len(ptrs), vec):
        pred = and_pred(lw.b, masks[g] if masks is not None else None, once)
        pred = checked_pred(lw, ins, KIND_STORE, ptrs[g], vec, elem, pred, site)
        emit_store(lw, ptrs[g], vals[g:g + vec], elem, pred, attrs)
