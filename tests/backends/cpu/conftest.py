"""The `cpu` fixture of the CPU backend's tests: host arrays run on the compiled CPU
backend (its knob on, the interpreter knobs off), re-registered so that an earlier host
launch without the knob, which left "cpu" cached as unavailable, does not stick."""
from __future__ import annotations

import pytest


@pytest.fixture
def cpu(monkeypatch):
    from tegula.runtime import backend_registry

    monkeypatch.setenv("TEGULA_CPU_BACKEND", "1")
    monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    factory = backend_registry._FACTORIES["cpu"]
    backend_registry.register_backend("cpu", factory)
    yield
    monkeypatch.undo()
    backend_registry.register_backend("cpu", factory)
