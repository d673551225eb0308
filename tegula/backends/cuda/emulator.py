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
from ..llvm.intrinsics import declare
from ..llvm.scalar_ops import ScalarTarget
from ..llvm.types import I8, I32, I64, ptr_type
from .assign_layouts import assign_layouts
from .checked import ERROR_WORDS
from .launcher import narrow_float_bits, raise_recorded_error
from .lower_kernel import KernelLowering
from .nvvm import NVPTXDevice, global_string

# CTA context (int64 slots): ctaid x y z, nctaid x y z, smem, barrier, shuffle scratch
_CTX_WORDS = 9


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
        self.plan = assign_layouts(kernel, num_warps)
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
        bar = ctypes.create_string_buffer(128)
        libc = host_jit.libc()
        if libc.pthread_barrier_init(bar, None, ctypes.c_uint(nthreads)) != 0:
            raise OSError("pthread_barrier_init failed")
        ctx = np.zeros(_CTX_WORDS, np.int64)
        ctx[3:6] = grid
        ctx[6] = (smem.ctypes.data + 15) // 16 * 16
        ctx[7] = ctypes.addressof(bar)
        ctx[8] = scratch.ctypes.data
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
