"""Triton 3.6 builtins that tegula's IR cannot express yet (map_elementwise, scaled
dots). They exist under their Triton names so that
kernels import fine and kernels that do not reach them compile; calling one raises a
clear NotImplementedError naming it.
"""
from __future__ import annotations

from .core import Builtin


def _unsupported(name: str, why: str) -> Builtin:
    def impl(sem, *args, **kwargs):
        raise NotImplementedError(f"tl.{name} is not supported by tegula yet ({why})")

    impl.__name__ = name
    impl.__doc__ = f"Triton's tl.{name}; not supported by tegula yet ({why})."
    return Builtin(impl, name)


map_elementwise = _unsupported("map_elementwise", "the IR has no map_elementwise region op")
dot_scaled = _unsupported("dot_scaled", "microscaled formats are not in the IR")
