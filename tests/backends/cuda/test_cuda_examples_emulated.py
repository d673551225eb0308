"""The examples (vector add, fused softmax, matmul, layer norm forward/backward,
attention) run end to end — frontend, passes, the CUDA backend's layouts and lowering —
on the host emulator, and check their own results; every kernel they compile is also
compiled to PTX and assembled by ptxas for sm_80 and sm_90a (when ptxas exists)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from emulated_backend import EmulatedCudaBackend

from tegula.backends.cuda.ptxas import find_ptxas
from tegula.runtime import backend_registry

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
STEMS = sorted(p.stem for p in EXAMPLES.glob("[0-9]*.py"))


@pytest.fixture
def emulated_host_backend(monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the examples run on the GPU itself here")
    monkeypatch.setattr(EmulatedCudaBackend, "ptx_capabilities", (80, 90) if find_ptxas() else ())
    monkeypatch.setattr(EmulatedCudaBackend, "assembled", [])
    original = backend_registry._FACTORIES["cpu"]
    backend_registry.register_backend("cpu", EmulatedCudaBackend)
    yield EmulatedCudaBackend
    backend_registry.register_backend("cpu", original)


@pytest.mark.parametrize("stem", STEMS)
def test_example_runs_through_the_cuda_lowering(stem, emulated_host_backend, capsys):
    spec = importlib.util.spec_from_file_location(f"tegula_cuda_example_{stem}", EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    before = emulated_host_backend.launches
    assert module.main(small=True)
    assert emulated_host_backend.launches > before, "the example's kernels ran on the emulated backend"
    if emulated_host_backend.ptx_capabilities:
        assert any(k.endswith("@sm_90") for k in emulated_host_backend.assembled)
