"""The host's monotonic clock in generated code: what `globaltimer` (a GPU's nanosecond
timer) reads on the host backends (the CPU backend and the CUDA emulator).

`clock_gettime(CLOCK_MONOTONIC)` is the clock `time.monotonic_ns()` reads, so kernels
and the Python around them see the same time line; it is a vDSO call (no system call)
and safe from any thread.
"""
from __future__ import annotations

import time

import llvmlite.ir as ir

from .intrinsics import declare
from .types import I32, I64, ptr_type

# struct timespec on LP64 hosts: {time_t tv_sec; long tv_nsec}
_TIMESPEC = ir.ArrayType(I64, 2)
_CLOCK_MONOTONIC = getattr(time, "CLOCK_MONOTONIC", 1)


def monotonic_ns(b: ir.IRBuilder, allocas: ir.IRBuilder) -> ir.Value:
    """An i64: the host's monotonic clock in nanoseconds, read where `b` stands.
    `allocas` is the lowering's builder of entry-block stack slots (one slot per read
    site, not one per execution in a loop)."""
    ts = allocas.alloca(_TIMESPEC, name="timespec")
    clock_gettime = declare(b.module, "clock_gettime", I32, [I32, ptr_type(0)])
    b.call(clock_gettime, [ir.Constant(I32, _CLOCK_MONOTONIC), ts])
    zero = ir.Constant(I32, 0)
    sec = b.load(b.gep(ts, [zero, zero], inbounds=True, source_etype=_TIMESPEC), typ=I64)
    nsec = b.load(b.gep(ts, [zero, ir.Constant(I32, 1)], inbounds=True, source_etype=_TIMESPEC), typ=I64)
    return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)
