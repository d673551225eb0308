"""The one fixed-point driver of the dataflow analyses over structured regions.

`fixed_point(step, limit=..., fallback=...)` runs `step()` (one sweep of an analysis,
returning whether anything changed) until a sweep changes nothing, and says whether
that happened. An analysis whose lattice has finite height passes a `limit` of at
least that height times the number of values, so it always converges; where the cap is
a guard against a pathological case rather than a proof, `fallback()` runs when it is
reached and must leave the analysis *sound* (every value still unresolved set to the
lattice's safe end: "unknown" axis facts, "mixed" pointer origins), never an
unfinished result that only looks final.

Users: the axis analysis' loop-carried values (`axis_analysis`), checked mode's
pointer origins (`backends/cuda/checked`), and the CUDA layout hints
(`backends/cuda/assign_layouts`, where hints are preferences, so stopping early costs
conversions, never correctness).
"""
from __future__ import annotations

from typing import Callable, Optional


def fixed_point(step: Callable[[], bool], limit: int, fallback: Optional[Callable[[], None]] = None) -> bool:
    """Sweep until nothing changes (True) or `limit` sweeps are done (False, after
    `fallback()`)."""
    for _ in range(limit):
        if not step():
            return True
    if fallback is not None:
        fallback()
    return False
