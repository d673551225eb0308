"""One CTA on the host: the context block a kernel thread reads its ids and CTA
resources from, the barriers, and the OS threads that run the CTA's GPU threads.

The context (`CTX_WORDS` int64 slots, laid out by the `SLOT_*` indices below) is
written by `CtaRunner` and read once per thread by `HostDevice.begin`: the CTA and grid
ids, the shared-memory buffer, three levels of pthread barriers — the CTA's (all
threads: `bar.sync`), one per warp (32 threads: shuffles, ldmatrix, mma) and one per
warpgroup (4 consecutive warps, 128 threads: the scope of wgmma) — and the exchange
buffer, `EXCHANGE_WORDS` i32 per thread, through which collective instructions read
other threads' registers. Barriers of a scope are `BARRIER_STRIDE` bytes apart. The
named barriers of `bar.sync index, threads` (a warp partition's) are a (count,
generation) pair of i32 each, whose thread count the instruction itself gives.

Each GPU thread is an OS thread (ctypes releases the GIL around the call), so a
barrier really waits for the threads of its scope and a thread stuck at one shows up
as a timeout rather than a hang.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ...llvm import host_jit

SLOT_CTAID = 0          # 3 slots: x, y, z
SLOT_NCTAID = 3         # 3 slots
SLOT_SMEM = 6
SLOT_CTA_BARRIER = 7
SLOT_WARP_BARRIERS = 8
SLOT_WARPGROUP_BARRIERS = 9
SLOT_EXCHANGE = 10
SLOT_NAMED_BARRIERS = 11
SLOT_SMEM_BYTES = 12   # the CTA's shared bytes (accesses past them fault, `faults.check_in_range`)
CTX_WORDS = 13
NAMED_BARRIERS = 16     # bar.sync's barrier indices: a (count, generation) pair of i32 each
# bytes allocated past the CTA's shared memory: an access there is recorded as the GPU's
# fault (`faults.check_in_range`) and the launch fails after it, but the host still
# performs it, which must not corrupt the process meanwhile (a wgmma descriptor's start
# field spans 2^18 bytes)
SMEM_GUARD_BYTES = 1 << 18

EXCHANGE_WORDS = 8      # i32 words per thread (mma publishes six registers)
BARRIER_STRIDE = 64     # bytes per pthread_barrier_t slot (glibc's is 32)
WARP_SIZE = 32
WARPGROUP_WARPS = 4

# What a CTA that timed out leaves behind: its threads still wait on these barriers
# (and would touch these buffers if woken), so they are never freed.
_ABANDONED: list[Any] = []


class _Barriers:
    """`count` pthread barriers of `parties` threads each, in one buffer."""

    def __init__(self, count: int, parties: int):
        self.count = count
        self.buf = ctypes.create_string_buffer(BARRIER_STRIDE * max(count, 1))
        self.address = ctypes.addressof(self.buf)
        libc = host_jit.libc()
        for i in range(count):
            if libc.pthread_barrier_init(ctypes.c_void_p(self.address + i * BARRIER_STRIDE), None,
                                         ctypes.c_uint(parties)) != 0:
                raise OSError("pthread_barrier_init failed")

    def destroy(self) -> None:
        libc = host_jit.libc()
        for i in range(self.count):
            libc.pthread_barrier_destroy(ctypes.c_void_p(self.address + i * BARRIER_STRIDE))


class CtaRunner:
    """Runs `fn(*values, thread_id, context)` — a JIT-compiled kernel entry taking the
    host device's two extra parameters last — for every CTA of a grid, one CTA at a
    time, each with 32 × `num_warps` threads and `smem_bytes` of shared memory."""

    def __init__(self, fn: Callable[..., None], num_warps: int, smem_bytes: int):
        self.fn = fn
        self.num_warps = num_warps
        self.smem_bytes = smem_bytes

    def run(self, grid: Sequence[int], values: Sequence[Any], timeout: float = 120.0) -> None:
        grid = tuple(grid) + (1,) * (3 - len(grid))
        nthreads = WARP_SIZE * self.num_warps
        smem = np.zeros(max(self.smem_bytes, 16) + 16 + SMEM_GUARD_BYTES, np.uint8)
        exchange = np.zeros(nthreads * EXCHANGE_WORDS, np.int32)
        named = np.zeros(2 * NAMED_BARRIERS, np.int32)
        barriers = [_Barriers(1, nthreads), _Barriers(self.num_warps, WARP_SIZE)]
        # warpgroups exist where the warps divide into groups of four
        groups = self.num_warps // WARPGROUP_WARPS if self.num_warps % WARPGROUP_WARPS == 0 else 0
        barriers.append(_Barriers(groups, WARPGROUP_WARPS * WARP_SIZE))
        ctx = np.zeros(CTX_WORDS, np.int64)
        ctx[SLOT_NCTAID:SLOT_NCTAID + 3] = grid
        ctx[SLOT_SMEM] = (smem.ctypes.data + 15) // 16 * 16
        ctx[SLOT_SMEM_BYTES] = self.smem_bytes
        ctx[SLOT_CTA_BARRIER] = barriers[0].address
        ctx[SLOT_WARP_BARRIERS] = barriers[1].address
        ctx[SLOT_WARPGROUP_BARRIERS] = barriers[2].address if groups else 0
        ctx[SLOT_EXCHANGE] = exchange.ctypes.data
        ctx[SLOT_NAMED_BARRIERS] = named.ctypes.data
        try:
            for z in range(grid[2]):
                for y in range(grid[1]):
                    for x in range(grid[0]):
                        ctx[SLOT_CTAID:SLOT_CTAID + 3] = (x, y, z)
                        self._run_cta(values, nthreads, ctx, timeout, (x, y, z))
        except BaseException:
            _ABANDONED.append((barriers, smem, exchange, named, ctx, values))
            raise
        else:
            for bars in barriers:
                bars.destroy()
        finally:
            host_jit.libc().fflush(None)  # device_print's lines, before Python writes anything

    def _run_cta(self, values: Sequence[Any], nthreads: int, ctx: np.ndarray, timeout: float,
                 cta: tuple[int, int, int]) -> None:
        threads = [threading.Thread(target=self.fn, args=(*values, t, ctx.ctypes.data), daemon=True)
                   for t in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
            if t.is_alive():
                raise TimeoutError(f"emulated CTA {cta} did not finish within {timeout:g} s: threads wait "
                                   "at a barrier that not all threads of its scope reach")
