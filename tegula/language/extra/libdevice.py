"""`tl.extra.libdevice` (also `triton.language.extra.libdevice` and
`tl.extra.cuda.libdevice`): Triton 3.6's libdevice functions, one builtin per entry of
`libdevice_table.LIBDEVICE`, each an `extern_elementwise` over its overloads.

On the GPU each call is the `__nv_*` function of NVIDIA's libdevice; the interpreter
evaluates the same symbol with `ir.extern_numpy` (correctly rounded where the function is
exact, float64 math rounded once otherwise); the bounds between the two are in
docs/numerics.md.
"""
from __future__ import annotations

from typing import Any

from ..core import Builtin
from ..dtypes import int1
from .libdevice_table import LIBDEVICE, LibdeviceFunction


def _make(fn: LibdeviceFunction) -> Builtin:
    table = {o.args: (o.symbol, o.ret) for o in fn.overloads}
    n = fn.arity

    def impl(sem, *args: Any):
        if len(args) != n:
            raise TypeError(f"libdevice.{fn.name}() takes {n} argument{'s' if n != 1 else ''} ({len(args)} given)")
        out = sem.extern_elementwise("", "", list(args), table, True)
        return sem.cast(out, int1) if fn.to_bool else out

    impl.__name__ = fn.name
    overloads = "; ".join(f"({', '.join(o.args)}) -> {o.ret} [{o.symbol}]" for o in fn.overloads)
    impl.__doc__ = f"libdevice {fn.name}: {overloads}."
    return Builtin(impl)


globals().update({name: _make(fn) for name, fn in LIBDEVICE.items()})

__all__ = sorted(LIBDEVICE)
