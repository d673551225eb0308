"""`descriptors_to_pointers`: tensor-descriptor accesses rewritten as pointer code, for
backends (or accesses) that do not lower the descriptor ops natively — the CPU backend,
and the CUDA backend where TMA does not apply (Triton's
`RewriteTensorDescriptorToPointer`).

Expects: descriptor values made by `make_tensor_descriptor` (the verifier's rule: they
never cross a region boundary). Guarantees: every `descriptor_load` /
`descriptor_store` / `descriptor_reduce` that `keep` does not claim becomes the code
the frontend emitted for it before descriptors were ops, so the rest of the compiler
sees what it always saw:

    coord_d = offset_d + arange(block_d)                    (i32, expanded to rank n)
    ptrs    = base + sum_d i64(coord_d) * stride_d          (broadcast to the block)
    inside  = AND_d (coord_d >= 0 and i64(coord_d) < i64(shape_d))
    load ptrs, inside, padding   |   store ptrs, value, inside
    atomic_rmw ptrs, value, inside {relaxed, gpu}

(i1 elements go through i8 memory, as `tl.load`/`tl.store` do.) What descriptor
semantics guarantee is kept as axis-analysis facts (`known_multiple_of` hints on the
base and the outer strides, `axis_rules.KNOWN_MULTIPLE_OF`): the base is 16-byte
aligned and every stride but the last (the constant 1) is a multiple of 16 bytes, so
a block's rows are 16-byte aligned runs and vectorize even when the base, shape and
strides are loaded from memory (Triton's tutorial 08). A
`make_tensor_descriptor` left without users is removed (one still read by a kept
access, or by a backend op such as `tma_load`, stays). The pass does not clean up
after itself: run `canonicalize`, `cse`, `licm`, `dce` next (`lower_descriptors`
does), which fold the splatted constants and hoist the address code out of loops as
they did when the frontend emitted it.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional

from ..ir import attrs as A
from ..ir.builder import Builder
from ..ir.clone import clone_kernel
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import DESCRIPTOR_OPS, Op
from ..ir.types import I1, I8, I64, PointerType, TensorDescType, TileType
from .axis_rules import KNOWN_MULTIPLE_OF
from .block_addresses import block_addresses
from .ir_utils import resolve, use_counts

Keep = Callable[[Instr], bool]


def has_descriptors(kernel: Kernel) -> bool:
    return any(ins.op in DESCRIPTOR_OPS for ins in kernel.walk())


def descriptors_to_pointers(kernel: Kernel, ctx: Any = None, keep: Optional[Keep] = None) -> Kernel:
    """Rewrite the descriptor accesses `keep` (default: none) does not claim."""
    _Rewriter(keep or (lambda ins: False)).block(kernel.body)
    used = use_counts(kernel.body)
    for ins in list(kernel.walk()):
        for region in ins.regions:
            region.instrs = [i for i in region.instrs if i.op is not Op.MAKE_TENSOR_DESCRIPTOR or used[i.result]]
    kernel.body.instrs = [i for i in kernel.body.instrs if i.op is not Op.MAKE_TENSOR_DESCRIPTOR or used[i.result]]
    return kernel


def lower_descriptors(kernel: Kernel, keep: Optional[Keep] = None, ctx: Any = None, copy: bool = True) -> Kernel:
    """`kernel` with the descriptor accesses `keep` does not claim rewritten and the
    result cleaned up: a copy (`kernel` itself when `copy` is False, or when it has no
    descriptor ops; `keep` is asked about the instructions being rewritten)."""
    if not has_descriptors(kernel):
        return kernel
    from .manager import PassContext, run_pipeline

    rewrite = functools.partial(descriptors_to_pointers, keep=keep)
    rewrite.__name__ = "descriptors_to_pointers"  # type: ignore[attr-defined]
    return run_pipeline(clone_kernel(kernel) if copy else kernel, [rewrite, *CLEANUP], ctx or PassContext())


# what `tir_opt` runs, so the rewritten address code is folded, merged and hoisted as
# the frontend's was
CLEANUP = ("canonicalize", "cse", "licm", "canonicalize", "dce")


class _Rewriter:
    def __init__(self, keep: Keep) -> None:
        self.keep = keep
        self.replaced: dict[Value, Value] = {}

    def block(self, block: Block) -> None:
        out: list[Instr] = []
        for ins in block.instrs:
            ins.operands = [resolve(v, self.replaced) for v in ins.operands]
            for region in ins.regions:
                self.block(region)
            if ins.op in (Op.DESCRIPTOR_LOAD, Op.DESCRIPTOR_STORE, Op.DESCRIPTOR_REDUCE) and not self.keep(ins):
                b = Builder(Block())
                b.loc = ins.loc
                self.rewrite(b, ins)
                out.extend(b.block.instrs)
                continue
            out.append(ins)
        block.instrs = out

    def rewrite(self, b: Builder, ins: Instr) -> None:
        desc_val = ins.operands[0]
        make = desc_val.owner
        if not (isinstance(make, Instr) and make.op is Op.MAKE_TENSOR_DESCRIPTOR):
            raise ValueError(f"'{ins.op.value}' takes a descriptor that is not made by 'make_tensor_descriptor'")
        desc: TensorDescType = desc_val.type
        n = desc.rank
        base, shape, strides = make.operands[0], make.operands[1:1 + n], make.operands[1 + n:]
        offsets = ins.operands[1:1 + n]
        ptrs, inside = _block_pointers(b, desc, base, shape, strides, offsets)
        elem = desc.element
        if elem == I1:  # bools live in bytes
            ptrs = b.op1(Op.BITCAST, ptrs, type=TileType(desc.block, PointerType(I8)))
        mem_elem = I8 if elem == I1 else elem
        tile = TileType(desc.block, mem_elem)
        if ins.op is Op.DESCRIPTOR_LOAD:
            fill = math.nan if desc.padding == "nan" else (0.0 if elem.is_float else 0)
            other = b.constant(fill, tile)
            v = b.op1(Op.LOAD, ptrs, inside, other, attrs=A.LoadAttrs(has_mask=True, has_other=True))
            if elem == I1:
                v = b.op1(Op.NE, v, b.constant(0, tile))
            self.replaced[ins.result] = v
            return
        value = ins.operands[-1]
        if elem == I1:
            value = b.cast(value, I8)
        if ins.op is Op.DESCRIPTOR_STORE:
            b.create(Op.STORE, [ptrs, value, inside], A.StoreAttrs(has_mask=True), result_types=[])
            return
        kind = "fadd" if ins.attrs.kind == "add" and elem.is_float else ins.attrs.kind
        b.create(Op.ATOMIC_RMW, [ptrs, value, inside], A.AtomicAttrs(kind, True, "relaxed", "gpu"))


# a descriptor's base and outer strides, in bytes (Triton's make_tensor_descriptor and
# TensorDescriptor contract: what a TMA tensor map requires)
DESCRIPTOR_ALIGN = 16


def _aligned(b: Builder, desc: TensorDescType, base: Value, strides: list[Value]) -> tuple[Value, list[Value]]:
    """`base` and `strides` with the divisibility the descriptor guarantees attached."""
    elem_bytes = max(1, desc.element.bytes)
    base = b.op1(Op.HINT, base, attrs=A.HintAttrs(KNOWN_MULTIPLE_OF, (DESCRIPTOR_ALIGN,)), type=base.type)
    outer = max(1, DESCRIPTOR_ALIGN // elem_bytes)
    if outer > 1:
        strides = [b.op1(Op.HINT, s, attrs=A.HintAttrs(KNOWN_MULTIPLE_OF, (outer,)), type=s.type)
                   for s in strides[:-1]] + strides[-1:]
    return base, strides


def _block_pointers(b: Builder, desc: TensorDescType, base: Value, shape: list[Value], strides: list[Value],
                    offsets: list[Value]) -> tuple[Value, Value]:
    """The block's pointers and its inside mask (see the module docstring)."""
    base, strides = _aligned(b, desc, base, strides)
    shape64 = [b.cast(s, I64) for s in shape]
    return block_addresses(b, desc.block, base, shape64, strides, offsets, range(desc.rank))
