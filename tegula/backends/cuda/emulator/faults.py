"""Faults the GPU raises that a host CPU does not:

- a vector access to an address that is not a multiple of its size ("misaligned
  address" on the GPU; an x86 load or store of 16 bytes anywhere just works):
  `check_aligned` on each vector access;
- a shared-memory access past the CTA's allocation ("out-of-range shared or local
  address", reported by the driver as an illegal address; on the host the buffer's
  neighbours are read or written without complaint): `check_in_range` on the shared
  accesses of the host device (`HostDevice.shared_ptr`; a TMA box at its first byte,
  its size being known only at run time) and on each wgmma operand's extent.

Each check is a compare and a rarely taken call that records the first faults of a
launch through a process symbol; `EmulatedKernel.run` then raises `EmulatedFault`
naming them, instead of the emulator passing a kernel the GPU would stop.

Found this way first on the H200: an epilogue's layout conversion whose scratch began
right after 8-byte mbarriers (session 11). The range check came with session 27's
out-of-range shared address in fla's `chunk_fwd_kernel_o` on the H200, which it could
not have caught: that one was ptxas's code (see `lower_wgmma.descriptor`).
"""
from __future__ import annotations

import ctypes
import functools
import threading

import llvmlite.ir as ir

from ...llvm.intrinsics import declare
from ...llvm.types import I32, I64, VOID

_SYMBOL = "tegula_emu_fault"
_RECORD = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int32)
SPACES = ("shared", "global")
KINDS = ("misaligned address", "out-of-range address")
_KEEP = 8  # faults kept per launch (one is enough to fail it; a few show the pattern)

_lock = threading.Lock()
_faults: list[tuple[str, str, int, int]] = []


class EmulatedFault(RuntimeError):
    """The emulated kernel did what faults on the GPU (a misaligned vector access, a
    shared access past the CTA's shared memory)."""


def _record(kind: int, space: int, address: int, nbytes: int) -> None:
    with _lock:
        if len(_faults) < _KEEP:
            _faults.append((KINDS[kind], SPACES[space], int(address), int(nbytes)))


@functools.lru_cache(maxsize=None)
def _register() -> object:
    import llvmlite.binding as llvm
    cb = _RECORD(_record)
    llvm.add_symbol(_SYMBOL, ctypes.cast(cb, ctypes.c_void_p).value)
    return cb


def check_aligned(b: ir.IRBuilder, address: ir.Value, nbytes: int, space: str) -> None:
    """Record a fault when the `nbytes`-byte access at `address` (an integer: a shared
    byte offset or a global address) is not `nbytes`-aligned. Vector accesses (8 bytes
    and more) only: a scalar one is misaligned only where its whole array is, and
    checking every scalar access cost the emulator-heavy tests a fifth of their time."""
    if nbytes < 8:
        return
    wide = b.zext(address, I64) if address.type.width < 64 else address
    bad = b.icmp_unsigned("!=", b.and_(wide, ir.Constant(I64, nbytes - 1)), ir.Constant(I64, 0))
    _record_if(b, bad, 0, space, wide, nbytes)


def check_in_range(b: ir.IRBuilder, offset: ir.Value, nbytes: int, limit: ir.Value) -> None:
    """Record a fault when the `nbytes`-byte shared access at byte `offset` (an i32)
    does not lie within the CTA's `limit` bytes (negative offsets included: the compare
    is unsigned)."""
    wide = b.zext(offset, I64) if offset.type.width < 64 else offset
    bad = b.icmp_unsigned(">", b.add(wide, ir.Constant(I64, nbytes)), b.zext(limit, I64))
    _record_if(b, bad, 1, "shared", wide, nbytes)


def _record_if(b: ir.IRBuilder, bad: ir.Value, kind: int, space: str, address: ir.Value, nbytes: int) -> None:
    _register()
    fn = declare(b.module, _SYMBOL, VOID, [I32, I32, I64, I32])
    with b.if_then(bad, likely=False):
        b.call(fn, [ir.Constant(I32, kind), ir.Constant(I32, SPACES.index(space)), address,
                    ir.Constant(I32, nbytes)])


def clear() -> None:
    with _lock:
        _faults.clear()


def raise_recorded(kernel: str) -> None:
    """Raise `EmulatedFault` for the faults recorded since `clear` (and clear them)."""
    with _lock:
        seen = list(_faults)
        _faults.clear()
    if seen:
        kinds = sorted({kind for kind, *_ in seen})
        where = "; ".join(f"{kind}: {n}-byte {space} access at {addr:#x}" for kind, space, addr, n in seen)
        raise EmulatedFault(f"kernel '{kernel}': {' and '.join(kinds)} on the GPU: {where}")
