"""The tensor-memory-accelerator instructions of `nvvm.NVPTXDevice` (sm_90; mbarrier
init/arrive from sm_80), as a mixin it inherits: the kernel parameter that holds a
`CUtensorMap` and its address, the mbarriers bulk copies complete on, the bulk tensor
copies themselves (`tma_load` into shared memory, `tma_store` out of it) and the
bulk-group commit and read-wait of stores. The emulator's models of the same methods
are `emulator/tma_models.py`.
"""
from __future__ import annotations

from typing import Sequence

import llvmlite.ir as ir

from ..llvm.intrinsics import inline_asm
from ..llvm.types import I32, I64, VOID, ptr_type


class TmaInstructions:
    def tensormap_param_type(self) -> ir.Type:
        """The type of a kernel parameter holding a TMA tensor map (`tensormap_param`)."""
        return ptr_type(0)

    def tensormap_param(self, module: ir.Module, fn: ir.Function, index: int) -> None:
        """Parameter `index` of `fn` is a 128-byte `CUtensorMap` passed by value, 64-byte
        aligned, read in place (`.param .align 64 .b8 name[128]`, a grid constant, as
        Triton passes it): TMA instructions take its generic address."""
        attrs = _ByValue128()
        attrs.add("byval")
        attrs.align = 64
        fn.args[index].attributes = attrs
        module.add_named_metadata("nvvm.annotations", [fn, "grid_constant", module.add_metadata([
            ir.Constant(I32, index + 1)])])

    def tensormap_address(self, b: ir.IRBuilder, param: ir.Value) -> ir.Value:
        """The generic address of a tensor-map parameter (`cvta.param`)."""
        return b.ptrtoint(param, I64)

    def mbarrier_init(self, b: ir.IRBuilder, addr: ir.Value, count: int) -> None:
        """`mbarrier.init.shared::cta.b64 [addr], count` (sm_80): phase 0, `count`
        arrivals pending, no transaction bytes expected."""
        inline_asm(b, VOID, [addr], f"mbarrier.init.shared::cta.b64 [$0], {count};", "r,~{memory}",
                   side_effect=True)

    def fence_mbarrier_init(self, b: ir.IRBuilder) -> None:
        """`fence.mbarrier_init.release.cluster` (sm_90): initialized mbarriers are seen
        initialized by the copy engine (and, after a barrier, by the other threads)."""
        inline_asm(b, VOID, [], "fence.mbarrier_init.release.cluster;", "~{memory}", side_effect=True)

    def mbarrier_expect_tx(self, b: ir.IRBuilder, addr: ir.Value, nbytes: int) -> None:
        """`mbarrier.arrive.expect_tx.shared::cta.b64 _, [addr], nbytes` (sm_90): this
        thread's arrival, and `nbytes` more transaction bytes the phase waits for."""
        inline_asm(b, VOID, [addr], f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {nbytes};",
                   "r,~{memory}", side_effect=True)

    def tma_load(self, b: ir.IRBuilder, dst: ir.Value, tmap: ir.Value, coords: Sequence[ir.Value],
                 bar: ir.Value) -> None:
        """`cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes`
        (sm_90): the tensor map's box at `coords` (innermost first, signed: a box partly
        or wholly outside the tensor is filled with the map's fill value) copied to the
        shared address `dst`, its bytes counted on the mbarrier at `bar`."""
        n = len(coords)
        cs = ", ".join(f"${2 + i}" for i in range(n))
        asm = (f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               f"[$0], [$1, {{{cs}}}], [${2 + n}];")
        inline_asm(b, VOID, [dst, tmap, *coords, bar], asm, ",".join(["r", "l"] + ["r"] * n + ["r", "~{memory}"]),
                   side_effect=True)

    def tma_store(self, b: ir.IRBuilder, src: ir.Value, tmap: ir.Value, coords: Sequence[ir.Value]) -> None:
        """`cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group` (sm_90): the box at
        the shared address `src` written to the tensor map's tensor at `coords` (the
        parts outside the tensor are not written), in this thread's current bulk group."""
        n = len(coords)
        cs = ", ".join(f"${1 + i}" for i in range(n))
        asm = f"cp.async.bulk.tensor.{n}d.global.shared::cta.tile.bulk_group [$0, {{{cs}}}], [${1 + n}];"
        inline_asm(b, VOID, [tmap, *coords, src], asm, ",".join(["l"] + ["r"] * n + ["r", "~{memory}"]),
                   side_effect=True)

    def bulk_commit(self, b: ir.IRBuilder) -> None:
        """`cp.async.bulk.commit_group`: this thread's bulk copies since the last commit form a group."""
        inline_asm(b, VOID, [], "cp.async.bulk.commit_group;", "~{memory}", side_effect=True)

    def bulk_wait_read(self, b: ir.IRBuilder, pending: int) -> None:
        """`cp.async.bulk.wait_group.read N`: all but this thread's newest N bulk groups
        have read their shared-memory source (it may be written again; the global
        writes themselves complete on their own)."""
        inline_asm(b, VOID, [], f"cp.async.bulk.wait_group.read {pending};", "~{memory}", side_effect=True)

    def mbarrier_wait(self, b: ir.IRBuilder, addr: ir.Value, phase: ir.Value) -> None:
        """Spin on `mbarrier.try_wait.parity.shared::cta.b64` until the phase of parity
        `phase` of the mbarrier at `addr` has completed (acquire: the copies it counted
        are then visible to this thread)."""
        asm = ("{ .reg .pred done;\n"
               "wait_${:uid}:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
               "@!done bra wait_${:uid}; }")
        inline_asm(b, VOID, [addr, phase], asm, "r,r,~{memory}", side_effect=True)

    def mbarrier_inval(self, b: ir.IRBuilder, addr: ir.Value) -> None:
        """`mbarrier.inval.shared::cta.b64 [addr]`: before the bytes are used otherwise."""
        inline_asm(b, VOID, [addr], "mbarrier.inval.shared::cta.b64 [$0];", "r,~{memory}", side_effect=True)

    def mbarrier_arrive(self, b: ir.IRBuilder, addr: ir.Value) -> None:
        """`mbarrier.arrive.shared::cta.b64 _, [addr]` (sm_80, release): this thread's
        arrival on the current phase; its earlier shared-memory reads are done."""
        inline_asm(b, VOID, [addr], "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", side_effect=True)


class _ByValue128(ir.values.ArgumentAttributes):
    """`byval([128 x i8])` on an opaque pointer parameter (llvmlite spells byval's type
    from a typed pointer's pointee, which opaque pointers do not have)."""

    def _expand(self, name: str, typ: ir.Type) -> str:
        return "byval([128 x i8])" if name == "byval" else super()._expand(name, typ)
