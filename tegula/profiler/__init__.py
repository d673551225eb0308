"""`triton.profiler` (proton's Python API), a light implementation: sessions that record
a tree of timed scopes and kernel launches, written as a `.hatchet` JSON file, and a
`viewer` that prints one.

    import tegula.profiler as proton          # `import triton.profiler` under compat
    proton.start("matmul", hook="triton")     # session 0, active; kernels' launch_metadata used
    with proton.scope("step", {"flops16": 2 * M * N * K}):
        kernel[grid](...)
    proton.deactivate(0); ...; proton.activate(0)
    proton.finalize()                         # writes matmul.hatchet

What it measures and how is in `session`; the launch hook in `profile`. Not provided:
proton's instrumentation mode (intra-kernel cycles) and hardware counters.
"""
from __future__ import annotations

import importlib
from typing import Any

from .profile import activate, deactivate, finalize, profile, start
from .scope import cpu_timed_scope, enter_scope, exit_scope, scope


def __getattr__(name: str) -> Any:
    # `viewer` on first use: `python -m tegula.profiler.viewer` must find it not imported yet
    if name == "viewer":
        return importlib.import_module(".viewer", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["activate", "cpu_timed_scope", "deactivate", "enter_scope", "exit_scope", "finalize", "profile",
           "scope", "start", "viewer"]
