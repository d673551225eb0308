"""`triton._C.libtriton.nvidia.cublas.CublasLt` under compat (Triton's tutorial 09 compares
its matmuls against it): c = a @ b.T through torch's cuBLAS."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
from triton._C.libtriton import nvidia
import torch
a, b = torch.randn(37, 16, dtype=torch.float64), torch.randn(21, 16, dtype=torch.float64)
c = torch.empty(37, 21, dtype=torch.float64)
nvidia.cublas.CublasLt(torch.empty(16, dtype=torch.uint8)).matmul(a, b, c)
assert torch.allclose(c, a @ b.T)
try:
    nvidia.cublas.CublasLt(None).matmul(a, a, c)
except ValueError as e:
    print("rejected:", e)
print("ok")
"""


def test_cublaslt_matmul_under_compat(tmp_path):
    script = tmp_path / "cublas_check.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, "-m", "tegula.compat", str(script)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rejected: CublasLt.matmul: a [M, K], b [N, K], c [M, N]" in out.stdout and out.stdout.endswith("ok\n")
