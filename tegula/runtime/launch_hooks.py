"""The launch hook point: where a tool (the profiler) sees every kernel launch.

`set_launch_hook(enter, exit)` makes every @jit launch call `token = enter(kernel,
grid, values, jitfn)` just before the compiled kernel runs and `exit(token)` just after
(`kernel` the CompiledKernel, `grid` the 3-tuple, `values` every parameter's value in
order, `jitfn` the JITFunction). `set_launch_hook(None, None)` removes it.

Zero cost when unused: the check is not on the launch path at all. A launch function
(`binder.build_runner`) is generated with or without the two calls, depending on the
hook present when it is built; setting or removing the hook drops every built launch
function, so the next launch of each kernel rebuilds its own. (A `kernel[grid]` bound
before the change and kept by the caller keeps the launch function it was bound to.)
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Optional

Enter = Callable[[Any, tuple, tuple, Any], Any]
Exit = Callable[[Any], None]

_hook: Optional[tuple[Enter, Exit]] = None
_lock = threading.Lock()
# JITFunctions whose launch function was built (they are rebuilt when the hook changes)
_built: "weakref.WeakSet[Any]" = weakref.WeakSet()


def current() -> Optional[tuple[Enter, Exit]]:
    """The (enter, exit) pair launch functions are built with now, or None."""
    return _hook


def set_launch_hook(enter: Optional[Enter], exit: Optional[Exit]) -> None:
    """Install (or with None, None remove) the launch hook; see the module docstring."""
    global _hook
    if (enter is None) != (exit is None):
        raise ValueError("set_launch_hook needs both enter and exit, or neither")
    with _lock:
        _hook = None if enter is None else (enter, exit)  # type: ignore[assignment]
        for jitfn in list(_built):
            jitfn._runner = None


def built(jitfn: Any) -> None:
    """Record that `jitfn` built a launch function (called by the binder)."""
    _built.add(jitfn)
