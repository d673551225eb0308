"""The `on` fixture of the end-to-end kernel tests: each test runs on the numpy
interpreter (forced with TEGULA_INTERPRET=1), on the compiled CPU backend, on the CUDA
lowering through the host emulator (CPU machines), and on a real GPU when there is
one (a test may also ask for "cuda-emulated-sm90": the emulator lowering for Hopper,
wgmma and TMA); `on(a)` moves a numpy array to where the kernel runs and `on.back(x)` brings it
back as numpy."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tegula
from tegula.runtime import backend_registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "cuda"))
from emulated_backend import EmulatedCudaBackend  # noqa: E402


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


HAS_CUDA = _has_cuda()


@pytest.fixture(params=["interpreter", "cpu", "cuda-emulated", "cuda"])
def on(request, monkeypatch):
    name = request.param
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if name == "interpreter":
        monkeypatch.setenv("TEGULA_INTERPRET", "1")
    else:
        monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
    if name == "cpu":
        monkeypatch.setenv("TEGULA_CPU_BACKEND", "1")
        from tegula.backends.cpu.backend import CpuProgram
        made = CpuProgram.compiled

        def ran_on_cpu():
            assert CpuProgram.compiled > made, "the kernels ran on the compiled CPU backend"
        request.addfinalizer(ran_on_cpu)
    # compiled kernels are cached per argument kinds, not per backend: start afresh
    for obj in list(vars(request.module).values()):
        if isinstance(obj, tegula.JITFunction):
            obj.clear_cache()
    if name == "cuda" and not HAS_CUDA:
        pytest.skip("no CUDA GPU")
    if name.startswith("cuda-emulated"):
        if HAS_CUDA:
            pytest.skip("host arrays run on the GPU's own backend here")
        monkeypatch.setattr(EmulatedCudaBackend, "capability", 90 if name.endswith("sm90") else 80)
        original = backend_registry._FACTORIES["cpu"]
        before = EmulatedCudaBackend.launches
        backend_registry.register_backend("cpu", EmulatedCudaBackend)

        def restore():
            backend_registry.register_backend("cpu", original)
            assert EmulatedCudaBackend.launches > before, "the kernels ran on the emulated CUDA backend"
        request.addfinalizer(restore)

    class Mover:
        backend = name

        def __call__(self, a):
            if name != "cuda":
                return a
            import torch
            return torch.from_numpy(a).cuda()

        def back(self, x):
            return x.cpu().numpy() if name == "cuda" else x

    return Mover()
