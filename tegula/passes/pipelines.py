"""Named pass pipelines and the registration of the target-independent passes.

A pipeline is a list of registered pass names, run in order by
`manager.run_pipeline`. `tir_opt` is the target-independent optimisation every
backend starts from (its output is the `tir_opt` stage); a backend extends it by
registering its own list, e.g. `register_pipeline("cuda", PIPELINES["tir_opt"] + [...])`.
Only the compiler driver decides which pipeline runs when.
"""
from __future__ import annotations

from typing import Sequence

from .block_pointers_to_pointers import block_pointers_to_pointers
from .canonicalize import canonicalize
from .carried_ranges import carried_ranges
from .combine_dot_add import combine_dot_add
from .cse import cse
from .dce import dce
from .descriptors_to_pointers import descriptors_to_pointers
from .flatten_loops import flatten_loops
from .licm import licm
from .manager import PASSES, register_pass

register_pass("canonicalize", canonicalize)
register_pass("combine_dot_add", combine_dot_add)
register_pass("cse", cse)
register_pass("dce", dce)
register_pass("licm", licm)
register_pass("carried_ranges", carried_ranges)
register_pass("flatten_loops", flatten_loops)
register_pass("descriptors_to_pointers", descriptors_to_pointers)
register_pass("block_pointers_to_pointers", block_pointers_to_pointers)

PIPELINES: dict[str, list[str]] = {
    # canonicalize first so CSE sees folded constants (and combine_dot_add the zero
    # accumulators); once more after LICM, which exposes invariant operands to the
    # folding rules; carried_ranges after LICM, which would hoist the patterns it
    # rebuilds in loops back out; DCE last sweeps what they left (the tiles' old slots)
    "tir_opt": ["canonicalize", "combine_dot_add", "cse", "licm", "carried_ranges", "canonicalize", "dce"],
}


def register_pipeline(name: str, passes: Sequence[str]) -> None:
    """Add or replace a named pipeline (every name must be a registered pass)."""
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise KeyError(f"pipeline {name!r} names unregistered passes: {', '.join(unknown)}")
    PIPELINES[name] = list(passes)
