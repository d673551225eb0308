"""Shared pytest configuration: test-suite-wide fixtures and the GPU marker.

GPU tests run whenever a CUDA GPU is present and skip only for that reason."""
from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


HAS_CUDA = _cuda_available()

requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets a private on-disk cache so tests never see each other's results."""
    monkeypatch.setenv("TEGULA_CACHE_DIR", str(tmp_path_factory.mktemp("tegula-cache")))
    # The pass manager verifies the IR between passes whenever tests run.
    monkeypatch.setenv("TEGULA_VERIFY_IR", "1")


@pytest.fixture(params=["interpreter", "cpu"])
def host_backend(request, monkeypatch):
    """Runs a test once on the interpreter and once on the compiled CPU backend (host
    arrays), returning which."""
    if request.param == "interpreter":
        monkeypatch.setenv("TEGULA_INTERPRET", "1")
    else:
        monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return request.param
