"""The atomic builtins of `tl` (Triton 3.6 names, signatures and defaults):
`atomic_add/and/or/xor/xchg/max/min(pointer, val, mask=None, sem=None, scope=None)` and
`atomic_cas(pointer, cmp, val, sem=None, scope=None)`. Each returns the values memory
held before the operation; the typing rules are in `semantic_atomic`.

The Semantic comes first as `_semantic` (Triton's own name for it) because `sem` is the
memory-semantic keyword of these functions.
"""
from __future__ import annotations

from .constexpr import unwrap_constexpr as U
from .core import builtin
from .semantic_arith import optional_tensor

_DOC = """Atomically {what} `val` at `pointer` (where `mask` is true) and return the old values.
`sem`: "acq_rel" (default), "acquire", "release" or "relaxed"; `scope`: "gpu" (default),
"cta" or "sys"."""


@builtin
def atomic_add(_semantic, pointer, val, mask=None, sem=None, scope=None):
    return _semantic.atomic_rmw("add", U(pointer), U(val), optional_tensor(_semantic, mask), U(sem), U(scope))


@builtin
def atomic_and(_semantic, pointer, val, mask=None, sem=None, scope=None):
    return _semantic.atomic_rmw("and", U(pointer), U(val), optional_tensor(_semantic, mask), U(sem), U(scope))


@builtin
def atomic_or(_semantic, pointer, val, mask=None, sem=None, scope=None):
    return _semantic.atomic_rmw("or", U(pointer), U(val), optional_tensor(_semantic, mask), U(sem), U(scope))


@builtin
def atomic_xor(_semantic, pointer, val, mask=None, sem=None, scope=None):
    return _semantic.atomic_rmw("xor", U(pointer), U(val), optional_tensor(_semantic, mask), U(sem), U(scope))


@builtin
def atomic_xchg(_semantic, pointer, val, mask=None, sem=None, scope=None):
    return _semantic.atomic_rmw("xchg", U(pointer), U(val), optional_tensor(_semantic, mask), U(sem), U(scope))


@builtin
def atomic_max(_semantic, pointer, val, mask=None, sem=None, scope=None):
    return _semantic.atomic_max_min("max", U(pointer), U(val), optional_tensor(_semantic, mask), U(sem),
                                    U(scope))


@builtin
def atomic_min(_semantic, pointer, val, mask=None, sem=None, scope=None):
    return _semantic.atomic_max_min("min", U(pointer), U(val), optional_tensor(_semantic, mask), U(sem),
                                    U(scope))


@builtin
def atomic_cas(_semantic, pointer, cmp, val, sem=None, scope=None):
    """Atomically compare-and-swap: where memory at `pointer` equals `cmp`, write `val`;
    return the old values. `sem` and `scope` as for the other atomics."""
    return _semantic.atomic_cas(U(pointer), U(cmp), U(val), U(sem), U(scope))


for _fn, _what in ((atomic_add, "add"), (atomic_and, "bitwise-and"), (atomic_or, "bitwise-or"),
                   (atomic_xor, "bitwise-xor"), (atomic_xchg, "exchange with"), (atomic_max, "take the max with"),
                   (atomic_min, "take the min with")):
    _fn.__doc__ = _fn.impl.__doc__ = _DOC.format(what=_what)
