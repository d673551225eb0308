"""Runs the CUDA backend's lowering on the host CPU, for testing without a GPU.

The kernel is lowered by the very same code as for the GPU (layouts, conversions,
reductions, scans, dots, control flow, checked mode), with `HostDevice` standing in
for the hardware pieces of `nvvm.NVPTXDevice`: the program and thread ids come from
parameters, `bar.sync` is `pthread_barrier_wait`, a warp shuffle is a store to a
scratch array, a barrier and a load, the shared-memory buffer is a host array, masked
accesses are branches instead of predicated PTX, math is the host's. The module is
JIT-compiled with LLVM for the host, and each CTA runs as 32 × num_warps OS threads
(ctypes releases the GIL), so barriers and shuffles behave as on the GPU.

`device_print` goes through the host's `printf` (stdout is flushed after each launch),
so its format is tested too. Scalar arguments of 16-bit float types reach the kernel
through a small wrapper taking their bit patterns (ctypes has no half type).

`ldmatrix` and `mma.sync` run as host models: each thread puts its row address or its
fragment registers into a per-CTA exchange buffer, a barrier, and each thread takes the elements the instruction's
definition gives it (for `mma`, computing its four accumulators from the elements the
PTX fragment tables place in other lanes (fma in f32, wrapping i32 sums
for int8)), a barrier again. It checks the lowering's fragment bookkeeping against an
independent statement of the instruction.

What this does not cover: the inline-PTX paths (predicated vector loads/stores, fp8
and rtz conversion instructions, `sqrt.approx`, `div.full`), libdevice (math is the
host's libm), and timing. Those are checked by ptxas and on the GPU (the numerical
suite's "cuda" backend, `benchmarks/gpu_smoke.py`).
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Optional, Sequence

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from ...ir.core import Kernel
from ...ir.types import PointerType, element_of
from ..llvm import host_jit
from ..llvm.intrinsics import declare, intrinsic
from ..llvm.scalar_ops import ScalarTarget
from ..llvm.types import F32, I8, I16, I32, I64, ptr_type
from .assign_layouts import assign_layouts
from .checked import ERROR_WORDS
from .launcher import narrow_float_bits, raise_recorded_error
from .lower_kernel import KernelLowering
from .nvvm import NVPTXDevice, global_string

# CTA context (int64 slots): ctaid x y z, nctaid x y z, smem, barrier, shuffle scratch,
# mma exchange buffer (`_MMA_WORDS` i32 per thread)
_CTX_WORDS = 10
_MMA_WORDS = 8


class HostDevice(NVPTXDevice):
    inline_ptx = False

    def __init__(self) -> None:
        self.triple = llvm.get_process_triple()

    def extra_params(self) -> list[ir.Type]:
        return [I32, ptr_type(0)]  # thread id, CTA context

    def begin(self, fn: ir.Function, entry: ir.IRBuilder, params: list[ir.Value]) -> None:
        self.tid, ctx = params
        words = [entry.load(entry.gep(ctx, [ir.Constant(I32, i)], source_etype=I64), typ=I64)
                 for i in range(_CTX_WORDS)]
        self.sregs = {"tid.x": self.tid}
        for i, a in enumerate("xyz"):
            self.sregs[f"ctaid.{a}"] = entry.trunc(words[i], I32)
            self.sregs[f"nctaid.{a}"] = entry.trunc(words[3 + i], I32)
        self.smem = entry.inttoptr(words[6], ptr_type(3))
        self.bar = entry.inttoptr(words[7], ptr_type(0))
        self.scratch = entry.inttoptr(words[8], ptr_type(0))
        self.exchange = entry.inttoptr(words[9], ptr_type(0))

    def annotate(self, module: ir.Module, fn: ir.Function, num_threads: int) -> None:
        host_jit.define_truncsfbf2(module)

    def sreg(self, b: ir.IRBuilder, name: str) -> ir.Value:
        return self.sregs[name]

    def barrier(self, b: ir.IRBuilder) -> None:
        b.call(declare(b.module, "pthread_barrier_wait", I32, [ptr_type(0)]), [self.bar])

    def shfl_i32(self, b: ir.IRBuilder, kind: str, v: ir.Value, amount: ir.Value) -> ir.Value:
        lane = b.and_(self.tid, ir.Constant(I32, 31))
        base = b.sub(self.tid, lane)
        b.store(v, b.gep(self.scratch, [self.tid], source_etype=I32))
        self.barrier(b)
        if kind == "bfly":
            src = b.xor(lane, amount)
        elif kind == "up":
            src = b.select(b.icmp_unsigned(">=", lane, amount), b.sub(lane, amount), lane)
        elif kind == "down":
            up = b.add(lane, amount)
            src = b.select(b.icmp_unsigned("<=", up, ir.Constant(I32, 31)), up, lane)
        else:
            src = b.and_(amount, ir.Constant(I32, 31))
        r = b.load(b.gep(self.scratch, [b.add(base, src)], source_etype=I32), typ=I32)
        self.barrier(b)
        return r

    def shared_ptr(self, b: ir.IRBuilder, byte_offset: ir.Value) -> ir.Value:
        return b.gep(self.smem, [byte_offset], source_etype=I8)

    def ldmatrix(self, b: ir.IRBuilder, byte_offset: ir.Value, count: int, trans: bool) -> list[ir.Value]:
        """`ldmatrix` from its definition: lanes publish their row addresses; thread t
        takes from matrix i row t // 4, 16-bit columns 2(t % 4) and 2(t % 4) + 1 (with
        `trans`, rows 2(t % 4), 2(t % 4) + 1 of column t // 4)."""
        slot0 = b.gep(self.exchange, [b.mul(self.tid, ir.Constant(I32, _MMA_WORDS))], source_etype=I32)
        b.store(byte_offset, slot0)
        self.barrier(b)
        lane = b.and_(self.tid, ir.Constant(I32, 31))
        warp_base = b.sub(self.tid, lane)
        hi, lo = b.lshr(lane, ir.Constant(I32, 2)), b.and_(lane, ir.Constant(I32, 3))

        def row_address(row: ir.Value) -> ir.Value:
            slot = b.gep(self.exchange, [b.mul(b.add(warp_base, row), ir.Constant(I32, _MMA_WORDS))],
                         source_etype=I32)
            return b.load(slot, typ=I32)

        def load(off: ir.Value, ty: ir.Type) -> ir.Value:
            return b.load(b.gep(self.smem, [off], source_etype=I8), typ=ty)

        out = []
        for i in range(count):
            first = ir.Constant(I32, 8 * i)
            if not trans:
                addr = row_address(b.add(first, hi))
                out.append(load(b.add(addr, b.shl(lo, ir.Constant(I32, 2))), I32))
                continue
            col = b.shl(hi, ir.Constant(I32, 1))  # byte offset of 16-bit column t // 4
            r0 = b.add(first, b.shl(lo, ir.Constant(I32, 1)))
            x0 = load(b.add(row_address(r0), col), I16)
            x1 = load(b.add(row_address(b.add(r0, ir.Constant(I32, 1))), col), I16)
            out.append(b.or_(b.zext(x0, I32), b.shl(b.zext(x1, I32), ir.Constant(I32, 16))))
        self.barrier(b)
        return out

    def mma(self, b: ir.IRBuilder, choice: Any, a: list[ir.Value], bb: list[ir.Value],
            c: list[ir.Value]) -> list[ir.Value]:
        """`mma.sync.m16n8kK` from the PTX fragment tables (see the module docstring)."""
        def slot(thread: ir.Value, word: int) -> ir.Value:
            idx = b.add(b.mul(thread, ir.Constant(I32, _MMA_WORDS)), ir.Constant(I32, word))
            return b.gep(self.exchange, [idx], source_etype=I32)

        for f, v in enumerate(list(a) + list(bb)):
            b.store(v, slot(self.tid, f))
        self.barrier(b)
        lane = b.and_(self.tid, ir.Constant(I32, 31))
        warp_base = b.sub(self.tid, lane)
        g = b.lshr(lane, ir.Constant(I32, 2))
        q = b.and_(lane, ir.Constant(I32, 3))
        kw, bits = choice.k_width, 8 * choice.elem_bytes

        def element(holder: ir.Value, word: int, packed: int) -> ir.Value:
            w = b.load(slot(b.add(warp_base, holder), word), typ=I32)
            raw = b.trunc(b.lshr(w, ir.Constant(I32, packed * bits)), ir.IntType(bits)) if bits < 32 else w
            if choice.ab_type == "f16":
                return b.fpext(b.bitcast(raw, ir.HalfType()), F32)
            if choice.ab_type == "bf16":
                return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)
            if choice.ab_type == "tf32":
                return b.bitcast(raw, F32)
            return b.sext(raw, I32)  # s8

        out = []
        for i in range(4):
            col = b.add(b.shl(q, ir.Constant(I32, 1)), ir.Constant(I32, i & 1))
            acc = c[i]
            for k in range(choice.k):
                packed, quad, hi = k % kw, (k // kw) % 4, k // (4 * kw)
                quad_c = ir.Constant(I32, quad)
                x = element(b.add(b.shl(g, ir.Constant(I32, 2)), quad_c), (i >> 1) + 2 * hi, packed)
                y = element(b.add(b.shl(col, ir.Constant(I32, 2)), quad_c), 4 + hi, packed)
                acc = intrinsic(b, "fma", [x, y, acc]) if choice.acc_type == "f32" else b.add(acc, b.mul(x, y))
            out.append(acc)
        self.barrier(b)
        return out

    def vprintf(self, b: ir.IRBuilder, entry: ir.IRBuilder, fmt: str, args: list[ir.Value]) -> None:
        # the lowering already widened floats to double and small integers to 32 bits,
        # as C's variadic calls want
        printf = declare(b.module, "printf", I32, [ptr_type(0)], var_arg=True)
        b.call(printf, [global_string(b, fmt), *args])

    def assertfail(self, b: ir.IRBuilder, message: str, file: str, line: int, func: str) -> None:
        pass


def _scalar_value(t: Any, v: Any) -> Any:
    """A launch's scalar argument as the ctypes slot of its parameter takes it."""
    e = element_of(t)
    if e.is_float and e.bits < 32:
        return narrow_float_bits(float(v), e.name)
    return float(v) if e.is_float else int(v)


class EmulatedKernel:
    """A kernel compiled for the host emulation; call `run(grid, args)`."""

    def __init__(self, kernel: Kernel, num_warps: int = 4, debug: bool = False):
        host_jit.init_native()
        self.kernel = kernel
        self.num_warps = num_warps
        self.plan = assign_layouts(kernel, num_warps, capability=80)
        lw = KernelLowering(kernel, self.plan, 80, debug=debug, checked=debug,
                            device=HostDevice(), target=ScalarTarget())
        module = lw.build()
        entry = host_jit.host_entry(module, lw.fn)
        self.lowering = lw
        self.smem_bytes = lw.smem_bytes
        self.checked = lw.checked
        self.llir = str(module)
        # f16c: half conversions inline instead of runtime calls the JIT cannot resolve
        tm = host_jit.target_machine(opt=2, native=False, features="+f16c")
        self.engine = host_jit.jit(self.llir, tm, 2)
        argtypes = [host_jit.ctype(a.type) for a in kernel.args]
        if self.checked:
            argtypes += [ctypes.c_void_p] + [ctypes.c_int64] * len(self.checked.pointer_args)
        argtypes += [ctypes.c_int32, ctypes.c_void_p]
        addr = self.engine.get_function_address(entry)
        self.fn = ctypes.CFUNCTYPE(None, *argtypes)(addr)

    def run(self, grid: Sequence[int], args: Sequence[Any], timeout: float = 120.0) -> Optional[np.ndarray]:
        """Run on numpy arrays (pointer arguments) and Python scalars; returns the
        checked-mode error record (int64[ERROR_WORDS]) when checked, else None."""
        grid = tuple(grid) + (1,) * (3 - len(grid))
        nthreads = 32 * self.num_warps
        values: list[Any] = []
        for a, v in zip(self.kernel.args, args):
            if isinstance(element_of(a.type), PointerType):
                values.append(v.ctypes.data)
            else:
                values.append(_scalar_value(a.type, v))
        errors = None
        if self.checked:
            errors = np.zeros(ERROR_WORDS, np.int64)
            values.append(errors.ctypes.data)
            for i in self.checked.pointer_args:
                arr = args[i]
                values.append(int(arr.nbytes))
        smem = np.zeros(max(self.smem_bytes, 16) + 16, np.uint8)
        scratch = np.zeros(nthreads, np.int32)
        exchange = np.zeros(nthreads * _MMA_WORDS, np.int32)
        bar = ctypes.create_string_buffer(128)
        libc = host_jit.libc()
        if libc.pthread_barrier_init(bar, None, ctypes.c_uint(nthreads)) != 0:
            raise OSError("pthread_barrier_init failed")
        ctx = np.zeros(_CTX_WORDS, np.int64)
        ctx[3:6] = grid
        ctx[6] = (smem.ctypes.data + 15) // 16 * 16
        ctx[7] = ctypes.addressof(bar)
        ctx[8] = scratch.ctypes.data
        ctx[9] = exchange.ctypes.data
        try:
            for z in range(grid[2]):
                for y in range(grid[1]):
                    for x in range(grid[0]):
                        ctx[0:3] = (x, y, z)
                        threads = [threading.Thread(target=self.fn, args=(*values, t, ctx.ctypes.data))
                                   for t in range(nthreads)]
                        for t in threads:
                            t.start()
                        for t in threads:
                            t.join(timeout)
                            if t.is_alive():
                                raise TimeoutError("emulated CTA did not finish (barrier mismatch?)")
        finally:
            libc.pthread_barrier_destroy(bar)
            libc.fflush(None)  # device_print's lines, before Python writes anything
        if errors is not None:
            raise_recorded_error(errors, self.checked.site_records(), self.kernel.name)
        return errors


def run(kernel: Kernel, grid: Sequence[int], args: Sequence[Any], num_warps: int = 4,
        debug: bool = False) -> Optional[np.ndarray]:
    return EmulatedKernel(kernel, num_warps, debug).run(grid, args)
