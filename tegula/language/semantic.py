"""`Semantic`: tegula's typing rules, emitting IR through the builder it is handed.

It is assembled from one mixin per concept:

- `semantic_base`   construction, `wrap`, constants, `to_tensor`, `bool_condition`,
                    combine-function calls and region building;
- `semantic_arith`  arithmetic, bitwise, comparison, min/max/clamp, `where`;
- `semantic_cast`   `cast` and `bitcast`;
- `semantic_shape`  `arange`, `full`, broadcasting, reshape/permute/join/split...;
- `semantic_memory` `load` and `store`;
- `semantic_atomic` atomic read-modify-write and compare-and-swap;
- `semantic_reduce` REDUCE/SCAN with built-in or user combine regions;
- `semantic_dot`    `dot`;
- `semantic_extern` `extern_elementwise` (libdevice and user `@extern` functions);
- `semantic_debug`  prints, asserts, hints.

The promotion tables themselves are pure functions in `semantic_types`.

Usage (the frontend):

    sem = Semantic(builder, options, call_function)
    x = sem.wrap(kernel.args[0])          # a tl.tensor over an IR value
    y = x + 1                             # operators delegate to sem
    tl.store.impl(sem, ptr, y, mask=m)    # builtins take sem first
"""
from __future__ import annotations

from .semantic_arith import ArithmeticMixin
from .semantic_atomic import AtomicMixin
from .semantic_base import SemanticBase
from .semantic_cast import CastMixin
from .semantic_debug import DebugMixin
from .semantic_dot import DotMixin
from .semantic_extern import ExternMixin
from .semantic_memory import MemoryMixin
from .semantic_reduce import ReduceMixin
from .semantic_shape import ShapeMixin
from .semantic_types import IncompatibleTypeError, computation_type, integer_promote, python_scalar_dtype


class Semantic(ArithmeticMixin, CastMixin, ShapeMixin, MemoryMixin, AtomicMixin, ReduceMixin, DotMixin,
               ExternMixin, DebugMixin, SemanticBase):
    """Typing rules and IR emission for one kernel being compiled (see the module docstring)."""


__all__ = ["Semantic", "IncompatibleTypeError", "computation_type", "integer_promote", "python_scalar_dtype"]
