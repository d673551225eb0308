"""Located entry points (`runtime.tracebacks.located_code`) stay internal for as long as
they live, also when an equal copy of them dies first. A kernel's launcher is rebuilt,
with the same source at the same site, whenever a launch hook (the profiler) comes or
goes; the old one lingers in a reference cycle with its namespace until the cyclic GC
runs. With a weak set of code objects (which compare by value) the new one was never
added, and the collection of the old one un-marked it: the profiler's Python call stack
then showed the launcher as a frame of the user's file (flaky on the GPU machine)."""
from __future__ import annotations

import gc

from tegula.runtime import tracebacks

_SOURCE = "def launcher(x):\n    return x + 1\n"


def _located(site):
    ns: dict = {}
    tracebacks.located_code(_SOURCE, site, ns)
    return ns["launcher"]


def test_a_located_function_stays_internal_after_an_equal_one_is_collected():
    site = (__file__, 20, "def _located(site):")
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        first = _located(site)
        second = _located(site)
        assert first.__code__ == second.__code__ and first.__code__ is not second.__code__
        del first  # in a cycle with its namespace: freed only by the collection below
        gc.collect()
        assert tracebacks.is_internal(second.__code__)
        assert second(1) == 2
    finally:
        if was_enabled:
            gc.enable()


def test_user_code_is_not_internal():
    def user():
        return 1
    assert not tracebacks.is_internal(user.__code__)
