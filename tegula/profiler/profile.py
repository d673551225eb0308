"""Proton's session API: `start`, `activate`, `deactivate`, `finalize`, `profile`, and
the launch hook that records kernels into active sessions.

While at least one session exists, the runtime's launch hook (`runtime.launch_hooks`)
is installed; `finalize` of the last session removes it, so launches outside profiling
pay nothing. Kernels are recorded under the innermost open scope of the launching
thread (context "shadow", proton's default) or under the user's Python call stack
(context "python"). With `hook="triton"` a kernel's `launch_metadata` function is
called as Triton calls it — `launch_metadata(grid, kernel, args)` — and its "name"
names the kernel's node while its numeric entries (`flops16`, `bytes`) become metrics.
"""
from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Callable, Optional

from ..runtime import launch_hooks
from ..runtime.tracebacks import is_internal
from .session import Node, Session, Timer, kernel_event_class

_CONTEXTS = ("shadow", "python")
_HOOKS = (None, "triton", "launch")
_sessions: dict[int, Session] = {}
_next_id = 0
_lock = threading.Lock()


def sessions() -> list[Session]:
    return list(_sessions.values())


def start(name: Optional[str] = None, *, context: str = "shadow", data: str = "tree",
          backend: Optional[str] = None, mode: Any = None, hook: Optional[str] = None) -> int:
    """Start recording a profile (active at once); returns its session id. `finalize`
    writes it to `<name>.hatchet` (`name` defaults to "proton")."""
    global _next_id
    if context not in _CONTEXTS:
        raise ValueError(f"proton context {context!r} is not supported (use one of {', '.join(_CONTEXTS)})")
    if data != "tree":
        raise ValueError(f"proton data {data!r} is not supported (tegula's profiler records a 'tree')")
    if hook not in _HOOKS:
        raise ValueError(f"proton hook {hook!r} is not supported (use None or 'triton')")
    with _lock:
        sid = _next_id
        _next_id += 1
        _sessions[sid] = Session(sid, name or "proton", context, hook, backend, mode)
        if len(_sessions) == 1:
            launch_hooks.set_launch_hook(_enter_launch, _exit_launch)
    return sid


def _selected(session: Optional[int]) -> list[Session]:
    if session is None:
        return sessions()
    s = _sessions.get(session)
    return [s] if s is not None else []


def activate(session: Optional[int] = None) -> None:
    """Resume recording in `session` (every session when None)."""
    for s in _selected(session):
        s.active = True


def deactivate(session: Optional[int] = None, flushing: bool = False) -> None:
    """Pause recording in `session` (every session when None); pending GPU timings are
    read now, so the work done while paused is not waited for later."""
    for s in _selected(session):
        s.active = False
        s.flush()


def finalize(session: Optional[int] = None, output_format: str = "hatchet") -> None:
    """Write `session` (every session when None) to its `.hatchet` file and end it."""
    if output_format != "hatchet":
        raise ValueError(f"proton output format {output_format!r} is not supported (tegula writes 'hatchet')")
    for s in _selected(session):
        s.write()
        with _lock:
            _sessions.pop(s.id, None)
            if not _sessions:
                launch_hooks.set_launch_hook(None, None)


def profile(func: Optional[Callable] = None, *, name: Optional[str] = None, context: str = "shadow",
            data: str = "tree", backend: Optional[str] = None, mode: Any = None,
            hook: Optional[str] = None) -> Callable:
    """Decorator: profile every call of `func` in a session of its own, written when the
    call returns."""

    def decorator(f: Callable) -> Callable:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            sid = start(name or f.__name__, context=context, data=data, backend=backend, mode=mode, hook=hook)
            try:
                return f(*args, **kwargs)
            finally:
                finalize(sid)

        return wrapper

    return decorator(func) if func is not None else decorator


# ---------------------------------------------------------------------------- the launch hook

def _python_path(session: Session) -> Node:
    """The node of the user's call stack (outermost first), for context "python"."""
    frames = []
    f = sys._getframe(2)
    while f is not None:
        if not is_internal(f.f_code) and not f.f_code.co_filename.startswith("<"):
            frames.append(f"{f.f_code.co_name}@{f.f_code.co_filename}:{f.f_lineno}")
        f = f.f_back
    node = session.stack()[-1]
    for name in reversed(frames):
        node = node.child(name, "function")
    return node


def _enter_launch(kernel: Any, grid: tuple, values: tuple, jitfn: Any) -> Any:
    active = [s for s in _sessions.values() if s.active]
    if not active:
        return None
    name, metrics = kernel.name, None
    fn = getattr(jitfn, "launch_metadata", None)
    if fn is not None and any(s.hook for s in active):
        metrics = dict(fn(grid, kernel, dict(zip(jitfn.arg_names, values))) or {})
        name = str(metrics.pop("name", name))
    nodes = []
    for s in active:
        parent = _python_path(s) if s.context == "python" else s.stack()[-1]
        node = parent.child(name, "kernel")
        if s.hook:
            node.add_metrics(metrics)
        nodes.append((s, node))
    on_gpu = getattr(getattr(kernel, "backend", None), "name", "") == "cuda"
    return nodes, Timer(kernel_event_class() if on_gpu else None)


def _exit_launch(token: Any) -> None:
    if token is None:
        return
    nodes, timer = token
    timer.stop()
    for s, node in nodes:
        s.record(node, timer)
