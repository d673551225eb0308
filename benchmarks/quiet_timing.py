"""Timing libraries side by side without one library's idle threads slowing another.

torch's OpenMP workers and OpenBLAS's threads keep spinning on the other cores after
their own call returns (OpenBLAS for up to ~2^28 cycles by default), and tegula's pool
workers briefly too (60 us). Whatever is timed next then shares a core with them: on
the 2-core VMs measured, a tegula launch right after `torch.softmax` ran up to 1.5x
slower (docs/performance.md, sessions 5-8). So every library is timed in the same way:

- a *block*: wait until the process is quiescent (its CPU time over a few ms of sleep
  is under 5% of a core: every pool, ours included, has stopped spinning and sleeps),
  then call the function `calls + 1` times back to back; the first call (which wakes
  the library's threads from sleep) is not counted, the median of the others is the
  block's time. Back to back, each library's own spinning helps itself only, which is
  what a program that calls it in a loop sees.
- *rounds*: every function runs one block per round, the order rotated each round so
  that none is always first or last; a row's figure is the median over rounds of the
  block times, its spread the lowest and highest block time, and a ratio's spread the
  lowest and highest of the per-round ratios.

No library's threading is configured (no `OMP_WAIT_POLICY`, no OpenBLAS timeout): each
runs as it ships. `machine_load()` reports how busy the machine was with other
processes meanwhile, since on a shared machine that moves every figure.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Dict, List


def quiesce(window: float = 0.004, idle: float = 0.05, max_wait: float = 1.0) -> float:
    """Sleep until this process used less than `idle` of a core over a `window` of
    sleep (all its threads: `process_time` counts them), at most `max_wait` seconds;
    returns the seconds waited."""
    start = time.perf_counter()
    while True:
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(window)
        c1, w1 = time.process_time(), time.perf_counter()
        if c1 - c0 < idle * (w1 - w0) or w1 - start > max_wait:
            return w1 - start


def block(fn: Callable[[], object], calls: int) -> float:
    """Median seconds per call of `calls` back-to-back calls, after quiescence and one
    uncounted call."""
    quiesce()
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def calls_for(fn: Callable[[], object], budget: float = 0.08, most: int = 10, least: int = 3) -> int:
    """How many calls make a block of about `budget` seconds (warms `fn` up too)."""
    fn()
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    return max(least, min(most, int(budget / max(t, 1e-6))))


def rounds(fns: Dict[str, Callable[[], object]], n: int) -> Dict[str, List[float]]:
    """Block times of each function over `n` rounds (rotated order), per round."""
    calls = {k: calls_for(f) for k, f in fns.items()}
    names = list(fns)
    times: Dict[str, List[float]] = {k: [] for k in fns}
    for r in range(n):
        for k in names[r % len(names):] + names[:r % len(names)]:
            times[k].append(block(fns[k], calls[k]))
    return times


def median(ts: List[float]) -> float:
    return statistics.median(ts)


def ratio(num: List[float], den: List[float]) -> tuple:
    """(median, lowest, highest) of the per-round ratios num[r] / den[r]."""
    rs = [a / b for a, b in zip(num, den)]
    return statistics.median(rs), min(rs), max(rs)


class MachineLoad:
    """Between `start()` and `others()`: the cores other processes of this machine kept
    busy (from /proc/stat, less this process's own CPU time) and the cores the
    hypervisor took for other guests (steal time); None where /proc/stat is missing."""

    def __init__(self) -> None:
        self._t0 = None

    @staticmethod
    def _busy() -> tuple:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        tick = os.sysconf("SC_CLK_TCK")
        # user nice system idle iowait irq softirq steal
        busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
        return busy / tick, (fields[7] if len(fields) > 7 else 0) / tick

    def start(self) -> None:
        try:
            self._t0 = (*self._busy(), time.process_time(), time.perf_counter())
        except OSError:
            self._t0 = None

    def others(self) -> tuple | None:
        """(cores busy with other processes, cores stolen), averaged since `start()`."""
        if self._t0 is None:
            return None
        busy0, steal0, own0, w0 = self._t0
        (busy, steal), own, w = self._busy(), time.process_time(), time.perf_counter()
        return max(0.0, (busy - busy0) - (own - own0)) / (w - w0), (steal - steal0) / (w - w0)
