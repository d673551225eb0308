"""Programmatic dependent launch (Triton's `tl.extra.cuda.gdc_wait` and
`gdc_launch_dependents`, tutorial 11).

`gdc_wait()` waits until every grid this launch depends on has completed and its
memory writes are visible; `gdc_launch_dependents()` lets the dependent grid start
early (a scheduling hint with no memory ordering). On sm_90 they are PTX
`griddepcontrol.wait` / `griddepcontrol.launch_dependents`; below sm_90, on the CPU
backend and in the interpreter, launches run one after another, so both are no-ops
with the same meaning.
"""
from __future__ import annotations

from .... import ir
from ...core import builtin


@builtin
def gdc_wait(sem):
    """Wait for the grids this one depends on (PDL) to complete."""
    sem.builder.create(ir.Op.GDC_WAIT, [], result_types=[])


@builtin
def gdc_launch_dependents(sem):
    """Allow the dependent grid (launched with `launch_pdl=True`) to start."""
    sem.builder.create(ir.Op.GDC_LAUNCH_DEPENDENTS, [], result_types=[])
