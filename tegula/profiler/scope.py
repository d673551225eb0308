"""Proton's scopes: named, timed regions of the profile tree.

    with proton.scope("attention", {"flops16": 2 * n * d}):   # or @proton.scope("name")
        ...
    proton.enter_scope("step"); ...; proton.exit_scope()

A scope opens a child of the innermost open scope (per thread) in every active session,
times itself (see `session`) and adds its metrics once per occurrence. Kernels
launched inside it are recorded under it.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Optional

from .profile import sessions as _sessions
from .session import Node, Session, Timer, gpu_event_class

_open = threading.local()  # per thread: the stack of open scopes' (session, node, timer) lists


def _stack() -> list:
    stack = getattr(_open, "stack", None)
    if stack is None:
        stack = _open.stack = []
    return stack


def enter_scope(name: str, *, triton_op: bool = False, metrics: Optional[dict] = None) -> int:
    """Open scope `name`; returns its depth (an id for matching `exit_scope`)."""
    entries: list[tuple[Session, Node]] = []
    for s in _sessions():
        if s.active:
            node = s.stack()[-1].child(str(name), "scope")
            node.add_metrics(metrics)
            s.stack().append(node)
            entries.append((s, node))
    timer = Timer(gpu_event_class()) if entries else None
    stack = _stack()
    stack.append((entries, timer))
    return len(stack) - 1


def exit_scope(triton_op: bool = False, metrics: Optional[dict] = None) -> int:
    """Close the innermost open scope; returns its id."""
    stack = _stack()
    if not stack:
        raise RuntimeError("proton.exit_scope() without a matching enter_scope()")
    entries, timer = stack.pop()
    if timer is not None:
        timer.stop()
    for s, node in entries:
        node.add_metrics(metrics)
        own = s.stack()
        if node in own:
            del own[own.index(node):]
        s.record(node, timer)
    return len(stack)


class scope:
    """`with scope(name, metrics):` or `@scope(name, metrics)` (see the module docstring)."""

    def __init__(self, name: str, metrics: Optional[dict] = None):
        self.name = name
        self.metrics = metrics

    def __enter__(self) -> "scope":
        self.id = enter_scope(self.name, metrics=self.metrics)
        return self

    def __exit__(self, *exc: Any) -> None:
        exit_scope()

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope(self.name, self.metrics):
                return func(*args, **kwargs)

        return wrapper


class cpu_timed_scope(scope):
    """A scope timed on the host clock only (no device events), as proton's."""

    def __enter__(self) -> "cpu_timed_scope":
        stack_before = len(_stack())
        super().__enter__()
        entries, timer = _stack()[stack_before]
        if timer is not None and timer.events is not None:
            _stack()[stack_before] = (entries, Timer(None))
        return self
