"""torch.compile (TorchInductor) with `import triton` resolving to tegula.

Each device runs `torch_compile_cases.py` once, in a subprocess under `python -m
tegula.compat` (so Inductor's compile workers resolve `triton` to tegula too), with
fresh Inductor and tegula caches; every case compares the compiled function with eager
PyTorch. On the CPU, Inductor generates Triton kernels (`cpu_backend = "triton"`) and
tegula runs them; the `cuda` parameter runs the same cases on CUDA tensors where a GPU
is present.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch._inductor")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("torch_compile_cases.py")
CASES = ["eager_backend", "pointwise", "reductions", "softmax", "sort", "layer_norm", "mlp_forward_backward",
         "flex_attention", "user_kernel", "user_kernel_mutation_analysis", "compile_workers",
         "cuda_ahead_of_time"]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                 reason="no CUDA GPU"))]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """device -> (case -> "ok" or the failure line, the whole output); run lazily."""
    runs: dict = {}

    def run(device: str):
        if device not in runs:
            tmp = tmp_path_factory.mktemp(f"torch_compile_{device}")
            env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"), TEGULA_CACHE_DIR=str(tmp / "tegula"))
            env.pop("TEGULA_INTERPRET", None)
            proc = subprocess.run([sys.executable, "-m", "tegula.compat", str(SCRIPT), device, *CASES],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
            out = proc.stdout + proc.stderr
            found = {m.group(1): "ok" if m.group(2) == "ok" else m.group(0)
                     for m in re.finditer(r"^CASE (\w+) (ok|FAIL)(.*)$", proc.stdout, re.M)}
            runs[device] = (found, out)
        return runs[device]

    return run


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_torch_compile_matches_eager(results, device, case):
    found, out = results(device)
    assert case in found, f"case {case} did not report:\n{out[-6000:]}"
    assert found[case] == "ok", f"{found[case]}\n{out[-6000:]}"
