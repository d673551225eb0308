"""Host models of the single-thread PTX instructions the lowering emits as inline
assembly, each in plain LLVM IR with the instruction's semantics where they are exact
and the correctly rounded result where the instruction is an approximation:

- `cp_async` completes at issue (a copy, or zeros where the predicate is false; with
  a source size, that many bytes copied and the rest zeroed), so
  `cp_async_commit` / `cp_async_wait` have nothing to order (the barrier the lowering
  puts after a wait still synchronizes the threads);
- `ld_global` / `st_global`: a predicated vector access is a branch around an ordinary
  access of the same words (a false predicate leaves the `other` words); cache hints
  have no meaning on the host; `volatile` loads are monotonic atomic loads, so a
  polling loop re-reads memory as `ld.volatile` does;
- `ex2_approx` is `exp2f`, `ex2_approx_ftz` the same with a denormal input and a
  denormal result flushed to zero; `sqrt_approx_ftz` / `rsqrt_approx_ftz` flush a denormal
  input to a zero of its sign as `.ftz` does, then take the correctly rounded square
  root (and its reciprocal); `div_full` divides correctly rounded. The approximations'
  own few-ulp errors are not modelled: results are within the GPU's bounds, not equal
  to its bits (docs/numerics.md);
- `cvt_f32_to_fp8` (`cvt.rn.satfinite`) and its pair form, `cvt_from_fp8` and `cvt_rz` are exact, by
  the portable integer code of `llvm.casts` (which implements the same saturating
  rounding);
- `libdevice_call` calls the host C library's function of the same meaning
  (`host_libm`), and `rsqrt` as 1/sqrt; libdevice functions without a host
  counterpart raise at lowering time;
- `globaltimer` (`mov.u64 %globaltimer`) reads the host's monotonic clock in
  nanoseconds (`llvm.host_clock`), the unit of the GPU's timer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import llvmlite.ir as ir

from ....ir.types import F32 as TF32
from ....ir.types import ScalarType
from ...llvm import casts, host_clock
from ...llvm.intrinsics import intrinsic
from ...llvm.scalar_ops import ScalarTarget
from ...llvm.types import F16, F32, I8, I16, I32
from ..nvvm import access_words

if TYPE_CHECKING:
    from .host_device import HostDevice

_SMALLEST_NORMAL_F32 = 2.0 ** -126


def _flush_denormal(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """`.ftz`: a denormal f32 reads as a zero of its sign."""
    tiny = b.fcmp_ordered("<", intrinsic(b, "fabs", [x]), ir.Constant(F32, _SMALLEST_NORMAL_F32))
    return b.select(tiny, intrinsic(b, "copysign", [ir.Constant(F32, 0.0), x]), x)


def _copy_prefix(b: ir.IRBuilder, dst: ir.Value, src: ir.Value, ty: ir.Type, nbytes: int,
                 src_size: ir.Value) -> None:
    """cp.async with a source size: the `nbytes` destination bytes are zeroed, then the
    first `src_size` of them copied byte by byte (the bytes past it are never read: they
    may lie outside the source allocation)."""
    b.store(ir.Constant(ty, None), dst, align=nbytes)
    pre = b.block
    head = b.append_basic_block("cp_prefix_head")
    body = b.append_basic_block("cp_prefix_body")
    done = b.append_basic_block("cp_prefix_done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I32)
    i.add_incoming(ir.Constant(I32, 0), pre)
    b.cbranch(b.icmp_signed("<", i, src_size), body, done)
    b.position_at_end(body)
    byte = b.load(b.gep(src, [i], source_etype=I8), typ=I8, align=1)
    b.store(byte, b.gep(dst, [i], source_etype=I8), align=1)
    i.add_incoming(b.add(i, ir.Constant(I32, 1)), body)
    b.branch(head)
    b.position_at_end(done)


class PtxModels:
    def ld_global(self: "HostDevice", b: ir.IRBuilder, ptr: ir.Value, nbytes: int, pred: Optional[ir.Value],
                  others: Optional[list[ir.Value]], quals: str, volatile: bool) -> list[ir.Value]:
        wt, nw = access_words(nbytes)

        def load() -> list[ir.Value]:
            self.access_alignment(b, ptr, nbytes, "global")
            if nbytes == 1:  # ld.b8 into a 16-bit register
                byte = b.load_atomic(ptr, "monotonic", 1, typ=I8) if volatile else b.load(ptr, typ=I8, align=1)
                return [b.zext(byte, I16)]
            if volatile:
                size = nbytes // nw
                return [b.load_atomic(b.gep(ptr, [ir.Constant(I32, i * size)], source_etype=I8), "monotonic",
                                      size, typ=wt) for i in range(nw)]
            if nw == 1:
                return [b.load(ptr, typ=wt, align=1)]
            vec = b.load(ptr, typ=ir.VectorType(wt, nw), align=1)
            return [b.extract_element(vec, ir.Constant(I32, i)) for i in range(nw)]

        if pred is None:
            return load()
        assert others is not None and len(others) == nw
        before = b.block
        with b.if_then(pred):
            loaded = load()
            then_end = b.block
        out = []
        for x, o in zip(loaded, others):
            phi = b.phi(x.type)
            phi.add_incoming(x, then_end)
            phi.add_incoming(o, before)
            out.append(phi)
        return out

    def st_global(self: "HostDevice", b: ir.IRBuilder, ptr: ir.Value, nbytes: int, words: list[ir.Value],
                  pred: Optional[ir.Value], quals: str) -> None:
        def store() -> None:
            self.access_alignment(b, ptr, nbytes, "global")
            if nbytes == 1:  # st.b8 from a 16-bit register: its low byte
                b.store(b.trunc(words[0], I8), ptr, align=1)
            elif len(words) == 1:
                b.store(words[0], ptr, align=1)
            else:
                vec = ir.Constant(ir.VectorType(words[0].type, len(words)), ir.Undefined)
                for i, w in enumerate(words):
                    vec = b.insert_element(vec, w, ir.Constant(I32, i))
                b.store(vec, ptr, align=1)

        if pred is None:
            store()
            return
        with b.if_then(pred):
            store()

    def cp_async(self: "HostDevice", b: ir.IRBuilder, byte_offset: ir.Value, ptr: ir.Value, nbytes: int,
                 pred: Optional[ir.Value], src_size: Optional[ir.Value] = None,
                 through_l1: bool = False) -> None:
        del through_l1  # a cache policy: the host has one memory
        dst = self.shared_ptr(b, byte_offset, nbytes)
        self.access_alignment(b, byte_offset, nbytes, "shared")
        wt, nw = access_words(nbytes)
        ty = wt if nw == 1 else ir.VectorType(wt, nw)
        if src_size is not None:
            _copy_prefix(b, dst, ptr, ty, nbytes, src_size)
            return
        if pred is None:
            b.store(b.load(ptr, typ=ty, align=1), dst, align=1)
            return
        with b.if_else(pred) as (then, otherwise):
            with then:
                b.store(b.load(ptr, typ=ty, align=1), dst, align=1)
            with otherwise:
                b.store(ir.Constant(ty, None), dst, align=1)

    def cp_async_commit(self: "HostDevice", b: ir.IRBuilder) -> None:
        return None

    def globaltimer(self: "HostDevice", b: ir.IRBuilder) -> ir.Value:
        return host_clock.monotonic_ns(b, self.entry)  # nanoseconds, as %globaltimer counts

    def griddepcontrol(self: "HostDevice", b: ir.IRBuilder, action: str) -> None:
        return None  # the emulator runs one grid at a time: its predecessor has completed

    def cp_async_wait(self: "HostDevice", b: ir.IRBuilder, pending: int) -> None:
        return None

    def ex2_approx(self: "HostDevice", b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return intrinsic(b, "exp2", [x])

    def ex2_approx_ftz(self: "HostDevice", b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return _flush_denormal(b, intrinsic(b, "exp2", [_flush_denormal(b, x)]))

    def sqrt_approx_ftz(self: "HostDevice", b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return intrinsic(b, "sqrt", [_flush_denormal(b, x)])

    def rsqrt_approx_ftz(self: "HostDevice", b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return b.fdiv(ir.Constant(F32, 1.0), intrinsic(b, "sqrt", [_flush_denormal(b, x)]))

    def div_full(self: "HostDevice", b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        return b.fdiv(x, y)

    def cvt_f32_to_fp8(self: "HostDevice", b: ir.IRBuilder, v: ir.Value, fmt: str) -> ir.Value:
        return casts.f32_to_fp8(b, v, fmt)

    def cvt_f32x2_to_fp8(self: "HostDevice", b: ir.IRBuilder, lo: ir.Value, hi: ir.Value,
                         fmt: str) -> list[ir.Value]:
        return [casts.f32_to_fp8(b, lo, fmt), casts.f32_to_fp8(b, hi, fmt)]

    def cvt_from_fp8(self: "HostDevice", b: ir.IRBuilder, v: ir.Value, fmt: str, dst: str) -> ir.Value:
        x = casts.fp8_to_f32(b, v, fmt)
        return b.fptrunc(x, F16) if dst == "f16" else x  # every fp8 value is an f16

    def cvt_rz(self: "HostDevice", b: ir.IRBuilder, v: ir.Value, dst: str) -> ir.Value:
        return casts.convert(b, ScalarTarget(), v, TF32, ScalarType(dst), "rtz")

    def libdevice_call(self: "HostDevice", b: ir.IRBuilder, symbol: str, args: Sequence[ir.Value],
                       ret: ir.Type) -> ir.Value:
        if symbol in ("__nv_rsqrtf", "__nv_rsqrt"):
            return b.fdiv(ir.Constant(ret, 1.0), intrinsic(b, "sqrt", list(args)))
        return ScalarTarget().extern(b, symbol, args, ret)
