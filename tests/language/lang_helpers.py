"""Helpers for the language-layer tests: a Semantic over a fresh kernel, no frontend.

`make_sem(args={"x": ir.PointerType(ir.F32)}, debug=False)` returns `(sem, kernel, values)`
where `values` maps argument names to tensors wrapping the kernel's arguments.
"""
from __future__ import annotations

from types import SimpleNamespace

from tegula.ir.builder import Builder, new_kernel
from tegula.language import Semantic


def make_sem(args=None, debug=False, call_function=None, **options):
    args = dict(args or {})
    kernel = new_kernel("k", list(args.values()), list(args.keys()))
    builder = Builder(kernel.body)
    sem = Semantic(builder, SimpleNamespace(debug=debug, **options), call_function)
    values = {name: sem.wrap(v) for name, v in zip(args, kernel.args)}
    return sem, kernel, values


def ops(kernel) -> list[str]:
    """The op names of every instruction, nested regions included, in order."""
    return [ins.op.value for ins in kernel.walk()]

