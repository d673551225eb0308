"""The examples run and check themselves: in-process at small sizes, as scripts, and as
unmodified Triton code through `python -m tegula.compat`.

Each example's `main(...)` returns True when its result matches a float64 reference
computed by torch or numpy; on a GPU machine the same tests run the examples on the GPU.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def load_example(stem: str):
    """Import examples/<stem>.py as a module (its name starts with a digit)."""
    spec = importlib.util.spec_from_file_location(f"tegula_example_{stem}", EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def subprocess_env(tmp_path: Path) -> dict:
    return {**os.environ, "TEGULA_CACHE_DIR": str(tmp_path / "cache"),
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


def test_vector_add(capsys):
    assert load_example("01_vector_add").main(small=True)
    out = capsys.readouterr().out
    assert "OK" in out and "GB/s" in out


def test_vector_add_size_not_a_multiple_of_the_block():
    assert load_example("01_vector_add").main(size=1000 + 3, small=True)


def test_fused_softmax(capsys):
    assert load_example("02_fused_softmax").main(small=True)
    assert "OK" in capsys.readouterr().out


def test_matmul_both_activations(capsys):
    module = load_example("03_matmul")
    assert module.main(small=True)
    out = capsys.readouterr().out
    assert "activation='none'" in out and "activation='leaky_relu'" in out and "MISMATCH" not in out


def test_matmul_autotuner_shape():
    module = load_example("03_matmul")
    configs = module.matmul_kernel.configs
    if module.ON_GPU:
        assert len(configs) >= 8
    else:
        assert len(configs) == 1  # the CPU uses one fixed config


def test_layer_norm_forward_and_backward(capsys):
    assert load_example("05_layer_norm").main(small=True)
    out = capsys.readouterr().out
    assert "identical bits: True" in out


def test_attention_causal_and_not(capsys):
    assert load_example("06_attention_forward").main(small=True)
    out = capsys.readouterr().out
    assert "causal=False" in out and "causal=True" in out and "MISMATCH" not in out


def test_grouped_gemm_pointer_tables_and_descriptors(capsys):
    assert load_example("09_grouped_gemm").main(small=True)
    out = capsys.readouterr().out
    assert "pointer tables on" in out and "tensor descriptors on" in out and "MISMATCH" not in out

def test_fp8_scaled_matmul_both_scale_granularities(capsys):
    assert load_example("10_fp8_scaled_matmul").main(small=True)
    out = capsys.readouterr().out
    assert out.count(" -> OK") == 4 and "per-row/column scales, bfloat16" in out and "MISMATCH" not in out

def test_split_k_atomics_and_deterministic_workspace(capsys):
    assert load_example("11_split_k_matmul").main(small=True)
    out = capsys.readouterr().out
    assert "atomics (float32 output)" in out and "identical bits twice: True" in out and "MISMATCH" not in out

def test_a_wrong_result_is_reported(capsys, monkeypatch):
    module = load_example("01_vector_add")
    right = module.add
    monkeypatch.setattr(module, "add", lambda x, y, block_size=1024: right(x, x, block_size))
    assert module.main(small=True) is False
    assert "MISMATCH" in capsys.readouterr().out


def test_vector_add_perf_report(tmp_path, capsys):
    load_example("01_vector_add").benchmark(save_path=str(tmp_path))
    out = capsys.readouterr().out
    assert "vector-add-performance" in out
    assert any(p.suffix == ".csv" for p in tmp_path.iterdir())


def test_script_exit_code(tmp_path):
    run = subprocess.run([sys.executable, str(EXAMPLES / "02_fused_softmax.py"), "--small"],
                         env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK" in run.stdout


@pytest.mark.parametrize("stem", ["01_vector_add", "03_matmul", "09_grouped_gemm", "10_fp8_scaled_matmul",
                                  "11_split_k_matmul"])
def test_runs_as_triton_code_through_compat(tmp_path, stem):
    source = (EXAMPLES / f"{stem}.py").read_text()
    triton_source = (source.replace("import tegula.language as tl", "import triton.language as tl")
                     .replace("import tegula as triton", "import triton"))
    assert "import tegula" not in triton_source, "the example must use tegula only through its two imports"
    script = tmp_path / f"{stem}_triton.py"
    script.write_text(triton_source)
    run = subprocess.run([sys.executable, "-m", "tegula.compat", str(script), "--small"],
                         env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK" in run.stdout and "MISMATCH" not in run.stdout
