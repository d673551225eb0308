"""What autotuning tells the user: the per-config table, the summary, the progress bar,
and the rule that picks the winner.

The choice rule makes tuning repeatable at a bounded cost: a config ties with the
fastest one when its 20th-percentile time is not above the fastest one's
80th-percentile time (their measured spreads overlap) and its median is within
`TIE_TOLERANCE` of the fastest one's; among tied configs the first in the user's list
wins. Two runs on the same inputs then pick the same config instead of flipping between
near-equal configs on jitter, and a noisy measurement never costs more than the
tolerance (with the spreads alone, a GPU whose timings spread by 8% had the attention
forward pick a config 7.8% slower than the fastest one). The configs within
`CONTEST_MARGIN` of the fastest are timed a second time, back to back, before the rule
applies (`contenders`): a GPU tuning one config after another warms up as it goes, and
the first configs timed ran up to 10% faster on an H200 for that alone.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any, Optional, Sequence, TextIO

# a config slower than the fastest one by more than this fraction (median against
# median) is never taken for a tie with it, however wide the measured spreads
TIE_TOLERANCE = 0.01
# configs within this fraction of the fastest one's median are timed a second time
# (`contenders`): a GPU's clock drifts by more than the tie tolerance while it tunes
# (first config timed 6.7% and 11% fast in two H200 runs of session 20)
CONTEST_MARGIN = 0.12


def as_triple(timing: Any) -> tuple[float, float, float]:
    """(median, p20, p80) from what a benchmarker returned: a number or a sequence."""
    if isinstance(timing, (list, tuple)):
        vals = [float(t) for t in timing]
        if len(vals) >= 3:
            return vals[0], vals[1], vals[2]
        if vals:
            return vals[0], vals[0], vals[0]
        return math.inf, math.inf, math.inf
    t = float(timing)
    return t, t, t


def choose_best(timings: Sequence[Any]) -> Optional[int]:
    """Index of the chosen config given each config's timing in config order (None if all
    failed). See the module docstring for the tie rule."""
    triples = [as_triple(t) for t in timings]
    finite = [i for i, (m, _, _) in enumerate(triples) if math.isfinite(m)]
    if not finite:
        return None
    fastest = min(finite, key=lambda i: triples[i][0])  # min() keeps the first of equals
    median, _, p80 = triples[fastest]
    upper = max(median, p80)
    for i in finite:
        m, p20, _ = triples[i]
        if min(m, p20) <= upper and m <= median * (1 + TIE_TOLERANCE):
            return i
    return fastest


def contenders(timings: Sequence[Any]) -> list[int]:
    """Indices (in config order) of the configs whose median is within CONTEST_MARGIN of
    the fastest one's: those the autotuner times again before it chooses (none when
    only one config is that close)."""
    medians = [as_triple(t)[0] for t in timings]
    finite = [m for m in medians if math.isfinite(m)]
    if not finite:
        return []
    bound = min(finite) * (1 + CONTEST_MARGIN)
    close = [i for i, m in enumerate(medians) if math.isfinite(m) and m <= bound]
    return close if len(close) > 1 else []


def format_timing(timing: Any) -> str:
    m, lo, hi = as_triple(timing)
    if not math.isfinite(m):
        return "failed"
    if lo == m == hi:
        return f"{m:.4f} ms"
    return f"{m:.4f} ms (p20 {lo:.4f}, p80 {hi:.4f})"


def print_table(kernel: str, key: Any, configs: Sequence[Any], timings: Sequence[Any],
                failures: dict[int, str], best: int, compile_s: float, bench_s: float,
                source: str = "benchmarked", stream: Optional[TextIO] = None) -> None:
    """TEGULA_PRINT_AUTOTUNING output: one line per config (the chosen one starred), then
    the summary."""
    out = stream or sys.stdout
    print(f"autotuning {kernel} over {len(configs)} configs, key {key} ({source}):", file=out)
    for i, (config, timing) in enumerate(zip(configs, timings)):
        mark = "*" if i == best else " "
        detail = f"failed: {failures[i]}" if i in failures else format_timing(timing)
        print(f" {mark} [{i}] {config}: {detail}", file=out)
    total = compile_s + bench_s
    # Triton's summary wording, so logs read the same under either name.
    print(f"tegula autotuning for function {kernel},\nwith key as {key},\n"
          f"finished after {total:.2f}s (compile {compile_s:.2f}s, benchmark {bench_s:.2f}s),\n"
          f"best config selected: {configs[best]};", file=out)


class TuningProgress:
    """A one-line progress bar on a terminal's stderr, shown only once tuning has taken
    longer than `delay` seconds (short tunings stay silent)."""

    def __init__(self, kernel: str, total: int, stream: Optional[TextIO] = None, delay: float = 2.0,
                 width: int = 30) -> None:
        self.kernel = kernel
        self.total = max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.width = width
        self.start = time.perf_counter()
        self.shown = False
        try:
            self.enabled = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.enabled = False

    def update(self, done: int, phase: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        if elapsed < self.delay and not self.shown:
            return
        filled = int(self.width * done / self.total)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\rautotuning {self.kernel} [{bar}] {done}/{self.total} {phase} {elapsed:5.1f}s")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
