"""`HostDevice`: `nvvm.NVPTXDevice` for a host CPU thread that plays one GPU thread.

It owns the CTA-level services every host model builds on, read from the CTA context
(`cta.py`) in the kernel's entry block:
- ids: `tid.x` is the host thread's parameter, `ctaid.*` / `nctaid.*` come from the
  context, `smid` is 0; `lane`, `warp` and `warpgroup` are derived once;
- barriers by scope: `sync(b, "cta")` is `bar.sync` (all threads), `sync(b, "warp")`
  waits for the 32 threads of this thread's warp only and `sync(b, "warpgroup")` for
  the 128 of its warpgroup — so a collective executed by some warps never waits for
  the others (warp-divergent code works as on the GPU);
- the exchange buffer: `publish(b, words)` puts i32 words in this thread's slot,
  `peek(b, thread, word)` reads another thread's, and `collective(b, scope, words, read)`
  is the whole pattern (publish, sync, read, sync) that shuffles and tensor-core
  instructions are modelled with;
- shared memory (a host buffer), `printf` for `vprintf`.

The instruction models themselves are mixins, one module per family (`warp_models`,
`wgmma_models`, `tma_models`, `ptx_models`; see the package docstring for how a new one plugs in). `HostDevice`
must model every method of `NVPTXDevice.INSTRUCTIONS`: one it does not is replaced by
a method that raises `HostModelMissing` naming the instruction, so a kernel needing it
fails at lowering time with that message instead of feeding PTX to the host's LLVM.
"""
from __future__ import annotations

from typing import Callable, Sequence

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ....ir.types import F16, F64
from ...llvm import casts, host_jit
from ...llvm.intrinsics import declare
from ...llvm.scalar_ops import ScalarTarget
from ...llvm.types import I8, I32, I64, ptr_type
from ..nvvm import NVPTXDevice, global_string
from . import cta, faults
from .ptx_models import PtxModels
from .tma_models import TmaModels
from .warp_models import WarpModels
from .wgmma_models import WgmmaModels

Scope = str  # "cta", "warp" or "warpgroup"


class HostModelMissing(NotImplementedError):
    """The kernel needs a hardware instruction the host emulator has no model of."""


class HostDevice(WarpModels, WgmmaModels, TmaModels, PtxModels, NVPTXDevice):
    # atomics: LLVM's atomicrmw / cmpxchg instead of inline PTX (lower_atomic)
    inline_ptx = False

    def __init__(self) -> None:
        self.triple = llvm.get_process_triple()

    def extra_params(self) -> list[ir.Type]:
        return [I32, ptr_type(0)]  # thread id, CTA context

    def begin(self, fn: ir.Function, entry: ir.IRBuilder, params: list[ir.Value]) -> None:
        self.tid, ctx = params
        self.entry = entry  # for allocas of the models (stack slots allocated once)
        words = [entry.load(entry.gep(ctx, [ir.Constant(I32, i)], source_etype=I64), typ=I64)
                 for i in range(cta.CTX_WORDS)]
        # %smid: the emulator runs one CTA at a time, on no multiprocessor of its own
        self.sregs = {"tid.x": self.tid, "smid": ir.Constant(I32, 0)}
        for i, a in enumerate("xyz"):
            self.sregs[f"ctaid.{a}"] = entry.trunc(words[cta.SLOT_CTAID + i], I32)
            self.sregs[f"nctaid.{a}"] = entry.trunc(words[cta.SLOT_NCTAID + i], I32)
        self.smem = entry.inttoptr(words[cta.SLOT_SMEM], ptr_type(3))
        self.smem_bytes = entry.trunc(words[cta.SLOT_SMEM_BYTES], I32)
        self.exchange = entry.inttoptr(words[cta.SLOT_EXCHANGE], ptr_type(0))
        self.named = entry.inttoptr(words[cta.SLOT_NAMED_BARRIERS], ptr_type(0))
        self.lane = entry.and_(self.tid, ir.Constant(I32, cta.WARP_SIZE - 1))
        self.warp = entry.lshr(self.tid, ir.Constant(I32, 5))
        self.warp_base = entry.sub(self.tid, self.lane)  # tid of this warp's lane 0

        def barrier_of(slot: int, index: ir.Value) -> ir.Value:
            base = entry.inttoptr(words[slot], ptr_type(0))
            return entry.gep(base, [entry.mul(index, ir.Constant(I32, cta.BARRIER_STRIDE))], source_etype=I8)

        self.barriers = {
            "cta": entry.inttoptr(words[cta.SLOT_CTA_BARRIER], ptr_type(0)),
            "warp": barrier_of(cta.SLOT_WARP_BARRIERS, self.warp),
            "warpgroup": barrier_of(cta.SLOT_WARPGROUP_BARRIERS,
                                    entry.lshr(self.warp, ir.Constant(I32, 2))),
        }

    def annotate(self, module: ir.Module, fn: ir.Function, num_threads: int) -> None:
        host_jit.define_truncsfbf2(module)
        _define_truncdfhf2(module)

    def sreg(self, b: ir.IRBuilder, name: str) -> ir.Value:
        return self.sregs[name]

    # ------------------------------------------------------------ CTA services

    def sync(self, b: ir.IRBuilder, scope: Scope) -> None:
        """Wait until every thread of this thread's `scope` arrives."""
        b.call(declare(b.module, "pthread_barrier_wait", I32, [ptr_type(0)]), [self.barriers[scope]])

    def barrier(self, b: ir.IRBuilder) -> None:
        self.sync(b, "cta")

    def warp_sync(self, b: ir.IRBuilder) -> None:
        self.sync(b, "warp")

    def named_barrier(self, b: ir.IRBuilder, index: "int | ir.Value", threads: int) -> None:
        """`bar.sync index, threads`: the last of `threads` arrivals resets the count and
        bumps the generation the others spin on (the generation is read before this
        thread's arrival, so it is the one this round ends)."""
        count, generation = self._named(b, index)
        seen = b.load_atomic(generation, "seq_cst", 4, typ=I32)
        last = self._arrive(b, count, generation, threads)
        wait, done = (b.append_basic_block(n) for n in ("named_wait", "named_done"))
        b.cbranch(last, done, wait)
        b.position_at_end(wait)
        b.call(declare(b.module, "sched_yield", I32, []), [])
        now = b.load_atomic(generation, "seq_cst", 4, typ=I32)
        b.cbranch(b.icmp_unsigned("!=", now, seen), done, wait)
        b.position_at_end(done)

    def named_barrier_arrive(self, b: ir.IRBuilder, index: "int | ir.Value", threads: int) -> None:
        """`bar.arrive index, threads`: an arrival that does not wait (the last one ends
        the round as `named_barrier`'s does)."""
        count, generation = self._named(b, index)
        self._arrive(b, count, generation, threads)

    def _named(self, b: ir.IRBuilder, index: "int | ir.Value") -> tuple[ir.Value, ir.Value]:
        """The (count, generation) words of named barrier `index`."""
        two = b.mul(index, ir.Constant(I32, 2)) if isinstance(index, ir.Value) else ir.Constant(I32, 2 * index)
        count = b.gep(self.named, [two], source_etype=I32)
        generation = b.gep(self.named, [b.add(two, ir.Constant(I32, 1))], source_etype=I32)
        return count, generation

    def _arrive(self, b: ir.IRBuilder, count: ir.Value, generation: ir.Value, threads: int) -> ir.Value:
        """Count one arrival; the last of `threads` resets the count and bumps the
        generation. Returns whether this one was the last."""
        arrived = b.atomic_rmw("add", count, ir.Constant(I32, 1), "seq_cst")
        is_last = b.icmp_unsigned("==", arrived, ir.Constant(I32, threads - 1))
        last, after = (b.append_basic_block(n) for n in ("named_last", "named_counted"))
        b.cbranch(is_last, last, after)
        b.position_at_end(last)
        b.atomic_rmw("xchg", count, ir.Constant(I32, 0), "seq_cst")
        b.atomic_rmw("add", generation, ir.Constant(I32, 1), "seq_cst")
        b.branch(after)
        b.position_at_end(after)
        return is_last

    def setmaxnreg(self, b: ir.IRBuilder, action: str, count: int) -> None:
        return None  # a host thread's registers are its own

    def slot(self, b: ir.IRBuilder, thread: ir.Value, word: int) -> ir.Value:
        """The address of i32 word `word` of `thread`'s exchange slot."""
        idx = b.add(b.mul(thread, ir.Constant(I32, cta.EXCHANGE_WORDS)), ir.Constant(I32, word))
        return b.gep(self.exchange, [idx], source_etype=I32)

    def publish(self, b: ir.IRBuilder, words: Sequence[ir.Value]) -> None:
        assert len(words) <= cta.EXCHANGE_WORDS, len(words)
        for i, w in enumerate(words):
            b.store(w, self.slot(b, self.tid, i))

    def peek(self, b: ir.IRBuilder, thread: ir.Value, word: int = 0) -> ir.Value:
        return b.load(self.slot(b, thread, word), typ=I32)

    def collective(self, b: ir.IRBuilder, scope: Scope, words: Sequence[ir.Value],
                   read: Callable[[], list[ir.Value]]) -> list[ir.Value]:
        """A collective instruction of `scope`: every thread publishes `words`, then
        `read()` computes this thread's results from the published slots. The second
        sync keeps a thread from overwriting its slot (in its next collective) while
        another thread of the scope still reads it."""
        self.publish(b, words)
        self.sync(b, scope)
        out = read()
        self.sync(b, scope)
        return out

    def shfl_i32(self, b: ir.IRBuilder, kind: str, v: ir.Value, amount: ir.Value) -> ir.Value:
        """`shfl.sync.<kind>.b32` with the full mask: a warp collective."""
        lane = self.lane
        if kind == "bfly":
            src = b.xor(lane, amount)
        elif kind == "up":
            src = b.select(b.icmp_unsigned(">=", lane, amount), b.sub(lane, amount), lane)
        elif kind == "down":
            up = b.add(lane, amount)
            src = b.select(b.icmp_unsigned("<=", up, ir.Constant(I32, 31)), up, lane)
        else:
            src = b.and_(amount, ir.Constant(I32, 31))
        return self.collective(b, "warp", [v], lambda: [self.peek(b, b.add(self.warp_base, src))])[0]

    def opaque_i32(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        """The value itself (the GPU's `mov` only hides its bits from LLVM)."""
        return v

    def prmt(self, b: ir.IRBuilder, a: ir.Value, c: ir.Value, selector: ir.Value) -> ir.Value:
        """`prmt.b32` (default mode): each result byte is the byte of {c, a} its
        selector nibble names (its bit 3, sign replication, is not used here)."""
        pair = b.or_(b.zext(a, I64), b.shl(b.zext(c, I64), ir.Constant(I64, 32)))
        out = ir.Constant(I32, 0)
        for i in range(4):
            nibble = b.and_(b.lshr(selector, ir.Constant(I32, 4 * i)), ir.Constant(I32, 7))
            byte = b.trunc(b.lshr(pair, b.zext(b.shl(nibble, ir.Constant(I32, 3)), I64)), I32)
            out = b.or_(out, b.shl(b.and_(byte, ir.Constant(I32, 0xFF)), ir.Constant(I32, 8 * i)))
        return out

    def shared_ptr(self, b: ir.IRBuilder, byte_offset: ir.Value, nbytes: int = 1) -> ir.Value:
        """The host address of shared byte `byte_offset`, for an access of `nbytes`: one
        past the CTA's shared memory is recorded as the GPU's fault."""
        faults.check_in_range(b, byte_offset, nbytes, self.smem_bytes)
        return b.gep(self.smem, [byte_offset], source_etype=I8)

    def access_alignment(self, b: ir.IRBuilder, address: ir.Value, nbytes: int, space: str) -> int:
        if isinstance(address.type, ir.PointerType):
            address = b.ptrtoint(address, I64)
        faults.check_aligned(b, address, nbytes, space)
        return 1

    def vprintf(self, b: ir.IRBuilder, entry: ir.IRBuilder, fmt: str, args: list[ir.Value]) -> None:
        # the lowering already widened floats to double and small integers to 32 bits,
        # as C's variadic calls want
        printf = declare(b.module, "printf", I32, [ptr_type(0)], var_arg=True)
        b.call(printf, [global_string(b, fmt), *args])

    def assertfail(self, b: ir.IRBuilder, message: str, file: str, line: int, func: str) -> None:
        raise HostModelMissing("the host emulator runs device_assert in checked mode only (debug=True records "
                               "the failure and raises DeviceAssertionError); it has no model of __assertfail")


def _define_truncdfhf2(module: ir.Module) -> None:
    """f64 → f16 rounding, the runtime function x86 LLVM calls when it computes an f16
    operation in f64 (`llvm.fma.f16`: the NVPTX target computes f16 fma natively),
    which the JIT could not resolve otherwise: through f32 rounded to odd, which the
    second rounding cannot double-round (`casts.convert`)."""
    if "__truncdfhf2" in module.globals:
        return
    fn = ir.Function(module, ir.FunctionType(ir.HalfType(), [ir.DoubleType()]), "__truncdfhf2")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(casts.convert(b, ScalarTarget(), fn.args[0], F64, F16))


def _missing(name: str) -> Callable[..., ir.Value]:
    def method(self: HostDevice, *args: object, **kwargs: object) -> ir.Value:
        raise HostModelMissing(f"the host emulator has no model of the '{name}' instruction yet "
                               "(see tegula/backends/cuda/emulator/__init__.py for how models plug in)")
    method.__name__ = name
    return method


for _name in NVPTXDevice.INSTRUCTIONS:
    if getattr(HostDevice, _name) is getattr(NVPTXDevice, _name):
        setattr(HostDevice, _name, _missing(_name))
