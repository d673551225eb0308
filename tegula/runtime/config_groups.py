"""Which autotuning configs compile to the same program on the backend that runs them.

A backend may declare `ignored_options`: launch options its code does not depend on
(the CPU backend and the interpreter ignore num_warps, num_stages, num_ctas, maxnreg).
Configs that differ only in those are one program, so the autotuner compiles and times
one of each group and shares its result (libraries tune over dozens of warp and stage
counts: flash-linear-attention's chunk kernels have 48 configs, 4 programs on the CPU).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..config import knobs
from .autotune_config import Config


def options_without_effect(bench_device: str) -> frozenset:
    """Launch options the backend that runs a host launch ignores (its `ignored_options`);
    none for GPU launches."""
    if bench_device != "cpu":
        return frozenset()
    from . import backend_registry

    backend = (backend_registry.get_backend("interpreter") if knobs.interpret
               else backend_registry._host_backend() or backend_registry.get_backend("interpreter"))
    return frozenset(getattr(backend, "ignored_options", ()))


def equivalent_configs(configs: Sequence[Config], ignored: frozenset) -> list[list[int]]:
    """Indices of `configs` grouped by what the backend compiles: the same meta-parameters,
    pre-hook and options apart from `ignored`, in first-seen order."""
    if not ignored:
        return [[i] for i in range(len(configs))]
    groups: dict[Any, list[int]] = {}
    for i, c in enumerate(configs):
        kept = {k: v for k, v in c.all_kwargs().items() if k not in ignored or k in c.kwargs}
        sig = (repr(sorted(kept.items(), key=lambda kv: kv[0])), id(c.pre_hook), repr(c.ir_override))
        groups.setdefault(sig, []).append(i)
    return list(groups.values())


def timed_once_per_group(bench_all: Callable[[list], tuple[int, list, dict]], configs: Sequence[Config],
                         groups: list[list[int]]) -> tuple[int, list, dict]:
    """`bench_all(configs) -> (best index, timings, failures by index)` run on the first
    config of each group, its results given to every member: the same triple for all of
    `configs`."""
    if len(groups) == len(configs):
        return bench_all(list(configs))
    reps = [members[0] for members in groups]
    rep_best, rep_timings, rep_failures = bench_all([configs[i] for i in reps])
    timings: list[Any] = [None] * len(configs)
    failures: dict[int, Any] = {}
    for g, members in enumerate(groups):
        for i in members:
            timings[i] = rep_timings[g]
            if g in rep_failures:
                failures[i] = rep_failures[g]
    return reps[rep_best], timings, failures
