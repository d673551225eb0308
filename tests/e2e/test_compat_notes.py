"""A script run through `python -m tegula.compat` that stops at a line of its own asking
for CUDA, on a machine without a GPU in use, gets a note saying that part is GPU-only."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: Path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, "-m", "tegula.compat", str(script)], env=env, capture_output=True,
                          text=True, timeout=120)


def test_gpu_only_line_is_named_after_the_traceback(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is in use: the script does not stop")
    script = tmp_path / "needs_gpu.py"
    script.write_text("import torch\nimport triton\nx = torch.ones(4)\nassert x.is_cuda, 'GPU only'\n")
    result = _run(script)
    assert result.returncode == 1
    assert result.stderr.rstrip().splitlines()[-2:] == [
        "AssertionError: GPU only",
        f"tegula.compat: note: {script}:4 needs a CUDA GPU (`assert x.is_cuda, 'GPU only'`) and none is in use "
        "here; the script ran on the CPU up to that line"]


def test_other_failures_get_no_note(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import triton\nraise ValueError('cuda is not the point here'.upper())\n")
    result = _run(script)
    assert result.returncode == 1 and "tegula.compat: note" not in result.stderr
