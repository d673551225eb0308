"""The CPU backend's grid executor: persistent worker threads that take a launch's
chunks of programs in native code.

A launch splits its linear program ids into chunks; the calling thread and the workers
claim chunks one at a time (a compare-and-swap on one word) until none is left, so a
worker that starts late only leaves more chunks to the others, and programs of uneven
cost balance themselves. The whole handoff is native code (LLVM IR compiled once per
process): the caller publishes the job, wakes sleeping workers, runs chunks, and waits
for the last one to finish without taking the GIL. Workers spin briefly after a job
(back-to-back launches find them awake), then sleep on a futex; the caller spins while
the last chunks finish, then sleeps likewise.

Why not `concurrent.futures`: on the 2-core VMs measured, a submit/result round trip to
an idle pool thread took ~95 us (median; the wake-up of the idle virtual CPU and two GIL
handoffs), a tenth of a 1 ms layer norm, paid before the worker's chunk even started.

Futexes are Linux's; elsewhere `GridPool.available()` is False and the backend runs the
chunks on a `ThreadPoolExecutor` instead (`backend.CpuProgram.run`).
"""
from __future__ import annotations

import ctypes
import functools
import os
import platform
import string
import sys
import threading
import time
from typing import Optional

from ..llvm import host_jit

# futex(2): the syscall number per machine, and the private wait/wake operations
_FUTEX_NR = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129

# words of the pool's control block (int64; the hot ones on cache lines of their own),
# named in the IR below as $NAME
_FN, _ARGV, _SIZES, _TOTAL, _CHUNKS, _NX, _NY, _NZ = range(8)
_ERR, _ERR_STRIDE, _SYSCALL, _FUTEX_NR_WORD, _WORKER_SPIN, _CALLER_SPIN = range(8, 14)
_CLAIM = 16      # (generation << 32) | next chunk
_GEN = 24        # generation (i32): the workers' futex word
_DONE = 32       # chunks finished (i32): the caller's futex word
_SLEEPERS = 40   # workers asleep on _GEN (i32)
_WAITING = 48    # 1 while the caller sleeps on _DONE (i32)
_WORDS = 56

# How long a worker spins after its last chunk before sleeping, and how long the caller
# spins for the others' last chunks. Short: a spinning thread takes its core from
# whatever runs next (torch's OpenMP workers spin for milliseconds after each call, and
# a tegula launch right after one ran measurably slower); long enough that a worker is
# still awake for a launch issued right after the last one returned (~20-40 us of
# Python between launches).
WORKER_SPIN_US = 60
CALLER_SPIN_US = 500

_IR = r"""
declare void @llvm.x86.sse2.pause()

define internal ptr @word(ptr %pool, i64 %k) alwaysinline {
  %p = getelementptr i64, ptr %pool, i64 %k
  ret ptr %p
}

define internal i64 @param(ptr %pool, i64 %k) alwaysinline {
  %p = getelementptr i64, ptr %pool, i64 %k
  %v = load atomic i64, ptr %p monotonic, align 8
  ret i64 %v
}

define internal void @relax() alwaysinline {
  $PAUSE
  ret void
}

define internal void @futex(ptr %pool, ptr %addr, i64 %op, i64 %val) {
  %fp = call i64 @param(ptr %pool, i64 $SYSCALL)
  %f = inttoptr i64 %fp to ptr
  %nr = call i64 @param(ptr %pool, i64 $FUTEXNR)
  %r = call i64 (i64, ...) %f(i64 %nr, ptr %addr, i64 %op, i64 %val, ptr null, ptr null, i64 0)
  ret void
}

; claim chunks of generation %gen and run them until none is left
define internal void @work(ptr %pool, i64 %gen) {
entry:
  %claimp = call ptr @word(ptr %pool, i64 $CLAIM)
  %donep = call ptr @word(ptr %pool, i64 $DONE)
  %waitp = call ptr @word(ptr %pool, i64 $WAITING)
  br label %claim
claim:
  %w = load atomic i64, ptr %claimp acquire, align 8
  %g = lshr i64 %w, 32
  %same = icmp eq i64 %g, %gen
  br i1 %same, label %check, label %out
check:
  %k = and i64 %w, 4294967295
  %n = call i64 @param(ptr %pool, i64 $CHUNKS)
  %more = icmp ult i64 %k, %n
  br i1 %more, label %take, label %out
take:
  %w1 = add i64 %w, 1
  %x = cmpxchg ptr %claimp, i64 %w, i64 %w1 acq_rel monotonic
  %ok = extractvalue { i64, i1 } %x, 1
  br i1 %ok, label %run, label %claim
run:
  ; chunk k holds programs [k*q + min(k, r), ...) of total = n*q + r (no overflow)
  %total = call i64 @param(ptr %pool, i64 $TOTAL)
  %q = udiv i64 %total, %n
  %r = urem i64 %total, %n
  %kq = mul i64 %k, %q
  %lt = icmp ult i64 %k, %r
  %kr = select i1 %lt, i64 %k, i64 %r
  %start = add i64 %kq, %kr
  %extra = zext i1 %lt to i64
  %len = add i64 %q, %extra
  %end = add i64 %start, %len
  %fp = call i64 @param(ptr %pool, i64 $FN)
  %f = inttoptr i64 %fp to ptr
  %argv = call i64 @param(ptr %pool, i64 $ARGV)
  %sizes = call i64 @param(ptr %pool, i64 $SIZES)
  %nx = call i64 @param(ptr %pool, i64 $NX)
  %ny = call i64 @param(ptr %pool, i64 $NY)
  %nz = call i64 @param(ptr %pool, i64 $NZ)
  %err = call i64 @param(ptr %pool, i64 $ERR)
  %stride = call i64 @param(ptr %pool, i64 $ERRSTRIDE)
  %eoff = mul i64 %k, %stride
  %erec = add i64 %err, %eoff
  %argvp = inttoptr i64 %argv to ptr
  %sizesp = inttoptr i64 %sizes to ptr
  %errp = inttoptr i64 %erec to ptr
  %nx32 = trunc i64 %nx to i32
  %ny32 = trunc i64 %ny to i32
  %nz32 = trunc i64 %nz to i32
  %rc = call i32 %f(ptr %argvp, ptr %sizesp, i64 %start, i64 %end, i32 %nx32, i32 %ny32, i32 %nz32, ptr %errp)
  %old = atomicrmw add ptr %donep, i32 1 seq_cst, align 4
  %now = add i32 %old, 1
  %n32 = trunc i64 %n to i32
  %last = icmp eq i32 %now, %n32
  br i1 %last, label %wake, label %claim
wake:
  %waiting = load atomic i32, ptr %waitp seq_cst, align 4
  %sleeps = icmp ne i32 %waiting, 0
  br i1 %sleeps, label %dowake, label %claim
dowake:
  call void @futex(ptr %pool, ptr %donep, i64 $FUTEXWAKE, i64 1)
  br label %claim
out:
  ret void
}

; a worker thread's life: wait for a new generation (spin, then sleep), work, repeat
define void @tegula_pool_worker(ptr %pool) {
entry:
  %genp = call ptr @word(ptr %pool, i64 $GEN)
  %sleepp = call ptr @word(ptr %pool, i64 $SLEEPERS)
  %g0 = load atomic i32, ptr %genp acquire, align 4
  br label %fresh
fresh:
  %mine = phi i32 [%g0, %entry], [%g, %job]
  br label %poll
poll:
  %spins = phi i64 [0, %fresh], [%spins1, %spin], [%spins, %woke]
  %g = load atomic i32, ptr %genp acquire, align 4
  %new = icmp ne i32 %g, %mine
  br i1 %new, label %job, label %idle
job:
  %g64 = zext i32 %g to i64
  call void @work(ptr %pool, i64 %g64)
  br label %fresh
idle:
  %limit = call i64 @param(ptr %pool, i64 $WORKERSPIN)
  %more = icmp ult i64 %spins, %limit
  br i1 %more, label %spin, label %sleep
spin:
  call void @relax()
  %spins1 = add i64 %spins, 1
  br label %poll
sleep:
  %s0 = atomicrmw add ptr %sleepp, i32 1 seq_cst, align 4
  %g2 = load atomic i32, ptr %genp seq_cst, align 4
  %still = icmp eq i32 %g2, %mine
  br i1 %still, label %wait, label %woke
wait:
  %mine64 = zext i32 %mine to i64
  call void @futex(ptr %pool, ptr %genp, i64 $FUTEXWAIT, i64 %mine64)
  br label %woke
woke:
  %s1 = atomicrmw sub ptr %sleepp, i32 1 seq_cst, align 4
  br label %poll
}

; one launch: publish it, run chunks, wait until every chunk is done
define void @tegula_pool_run(ptr %pool, i64 %fn, i64 %argv, i64 %sizes, i64 %total, i64 %n, i64 %nx, i64 %ny,
                             i64 %nz, i64 %err, i64 %stride) {
entry:
  %claimp = call ptr @word(ptr %pool, i64 $CLAIM)
  %genp = call ptr @word(ptr %pool, i64 $GEN)
  %donep = call ptr @word(ptr %pool, i64 $DONE)
  %sleepp = call ptr @word(ptr %pool, i64 $SLEEPERS)
  %waitp = call ptr @word(ptr %pool, i64 $WAITING)
  store atomic i64 %fn, ptr %pool monotonic, align 8
  %p1 = call ptr @word(ptr %pool, i64 $ARGV)
  store atomic i64 %argv, ptr %p1 monotonic, align 8
  %p2 = call ptr @word(ptr %pool, i64 $SIZES)
  store atomic i64 %sizes, ptr %p2 monotonic, align 8
  %p3 = call ptr @word(ptr %pool, i64 $TOTAL)
  store atomic i64 %total, ptr %p3 monotonic, align 8
  %p4 = call ptr @word(ptr %pool, i64 $CHUNKS)
  store atomic i64 %n, ptr %p4 monotonic, align 8
  %p5 = call ptr @word(ptr %pool, i64 $NX)
  store atomic i64 %nx, ptr %p5 monotonic, align 8
  %p6 = call ptr @word(ptr %pool, i64 $NY)
  store atomic i64 %ny, ptr %p6 monotonic, align 8
  %p7 = call ptr @word(ptr %pool, i64 $NZ)
  store atomic i64 %nz, ptr %p7 monotonic, align 8
  %p8 = call ptr @word(ptr %pool, i64 $ERR)
  store atomic i64 %err, ptr %p8 monotonic, align 8
  %p9 = call ptr @word(ptr %pool, i64 $ERRSTRIDE)
  store atomic i64 %stride, ptr %p9 monotonic, align 8
  store atomic i32 0, ptr %donep monotonic, align 4
  ; the release store of the claim word publishes everything above
  %g0 = load atomic i32, ptr %genp monotonic, align 4
  %g = add i32 %g0, 1
  %g64 = zext i32 %g to i64
  %w = shl i64 %g64, 32
  store atomic i64 %w, ptr %claimp release, align 8
  store atomic i32 %g, ptr %genp seq_cst, align 4
  %sleepers = load atomic i32, ptr %sleepp seq_cst, align 4
  %any = icmp ne i32 %sleepers, 0
  br i1 %any, label %wake, label %work
wake:
  call void @futex(ptr %pool, ptr %genp, i64 $FUTEXWAKE, i64 2147483647)
  br label %work
work:
  call void @work(ptr %pool, i64 %g64)
  %n32 = trunc i64 %n to i32
  br label %poll
poll:
  %spins = phi i64 [0, %work], [%spins1, %spin], [%spins, %woke]
  %d = load atomic i32, ptr %donep acquire, align 4
  %all = icmp eq i32 %d, %n32
  br i1 %all, label %out, label %idle
idle:
  %limit = call i64 @param(ptr %pool, i64 $CALLERSPIN)
  %more = icmp ult i64 %spins, %limit
  br i1 %more, label %spin, label %sleep
spin:
  call void @relax()
  %spins1 = add i64 %spins, 1
  br label %poll
sleep:
  store atomic i32 1, ptr %waitp seq_cst, align 4
  %d2 = load atomic i32, ptr %donep seq_cst, align 4
  %still = icmp ne i32 %d2, %n32
  br i1 %still, label %wait, label %woke
wait:
  %d64 = zext i32 %d2 to i64
  call void @futex(ptr %pool, ptr %donep, i64 $FUTEXWAIT, i64 %d64)
  br label %woke
woke:
  store atomic i32 0, ptr %waitp seq_cst, align 4
  br label %poll
out:
  ret void
}

; spins for calibration: %n rounds of the spin loop's pause
define void @tegula_pool_spin(i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  call void @relax()
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %out
out:
  ret void
}
"""


def _machine() -> str:
    return platform.machine().lower()


@functools.lru_cache(maxsize=None)
def _engine():
    """The pool's native functions, compiled once per process."""
    pause = "call void @llvm.x86.sse2.pause()" if _machine() in ("x86_64", "amd64") else ""
    names = {"PAUSE": pause, "SYSCALL": _SYSCALL, "FUTEXNR": _FUTEX_NR_WORD, "CLAIM": _CLAIM, "DONE": _DONE,
             "WAITING": _WAITING, "CHUNKS": _CHUNKS, "TOTAL": _TOTAL, "FN": _FN, "ARGV": _ARGV,
             "SIZES": _SIZES, "NX": _NX, "NY": _NY, "NZ": _NZ, "ERRSTRIDE": _ERR_STRIDE, "ERR": _ERR,
             "FUTEXWAKE": _FUTEX_WAKE, "FUTEXWAIT": _FUTEX_WAIT, "GEN": _GEN, "SLEEPERS": _SLEEPERS,
             "WORKERSPIN": _WORKER_SPIN, "CALLERSPIN": _CALLER_SPIN}
    text = f'target triple = "{host_jit.llvm_triple()}"\n' + string.Template(_IR).substitute(names)
    engine = host_jit.jit(text, host_jit.target_machine(opt=2), 2)
    addr = engine.get_function_address
    worker = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr("tegula_pool_worker"))
    run = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] + [ctypes.c_int64] * 10))(addr("tegula_pool_run"))
    spin = ctypes.CFUNCTYPE(None, ctypes.c_int64)(addr("tegula_pool_spin"))
    return engine, worker, run, spin


@functools.lru_cache(maxsize=None)
def _spins_per_us() -> float:
    """Rounds of the spin loop per microsecond on this host (a pause takes ~10 cycles on
    older x86 cores, ~140 on newer ones)."""
    spin = _engine()[3]
    n = 20000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        spin(n)
        best = min(best, time.perf_counter() - t0)
    return n / max(best * 1e6, 1e-3)


class GridPool:
    """`threads - 1` workers and the calling thread, running a launch's chunks."""

    @staticmethod
    def available() -> bool:
        return sys.platform.startswith("linux") and _machine() in _FUTEX_NR

    def __init__(self, threads: int):
        self.threads = threads
        _, self._worker, self._run, _ = _engine()
        # the control block: 64-byte aligned, so each hot word owns its cache line
        self._raw = (ctypes.c_int64 * (_WORDS + 8))()
        base = ctypes.addressof(self._raw)
        self.addr = base + (-base % 64)
        words = (ctypes.c_int64 * _WORDS).from_address(self.addr)
        words[_SYSCALL] = ctypes.cast(host_jit.libc().syscall, ctypes.c_void_p).value
        words[_FUTEX_NR_WORD] = _FUTEX_NR[_machine()]
        rate = _spins_per_us()
        words[_WORKER_SPIN] = int(WORKER_SPIN_US * rate)
        words[_CALLER_SPIN] = int(CALLER_SPIN_US * rate)
        self._words = words
        # one launch at a time: another thread's launch meanwhile runs on its own thread
        self.lock = threading.Lock()
        for k in range(threads - 1):
            # ctypes releases the GIL for the call, which never returns: the thread lives
            # in native code, and a daemon thread does not hold up the interpreter's exit
            threading.Thread(target=self._worker, args=(self.addr,), daemon=True,
                             name=f"tegula-cpu-{k}").start()

    def run(self, fn: int, argv: int, sizes: int, total: int, chunks: int, grid: tuple,
            err: int, err_stride: int) -> bool:
        """Run programs [0, total) of `grid` in `chunks` chunks (chunk k's error record at
        err + k * err_stride); False, running nothing, when another launch holds the pool."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            self._run(self.addr, fn, argv, sizes, total, chunks, grid[0], grid[1], grid[2], err, err_stride)
        finally:
            self.lock.release()
        return True


_POOLS: dict[int, GridPool] = {}
_POOLS_LOCK = threading.Lock()


def grid_pool(threads: int) -> Optional[GridPool]:
    """The process's pool of `threads` threads (None where futexes are missing)."""
    if not GridPool.available():
        return None
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = GridPool(threads)
        return pool


def _forget_pools() -> None:
    # a forked child has the parent's control blocks but none of its worker threads
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)
