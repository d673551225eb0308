"""`python -m tegula.compat -m pytest ...` runs a test suite written for `import triton`
unmodified, `triton._internal_testing` included (Triton's own tests import it), in
pytest-xdist workers too; `import triton.profiler as proton` works under compat."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TEST_FILE = textwrap.dedent('''
    import numpy as np
    import pytest
    import triton
    import triton.language as tl
    from triton._internal_testing import (dtypes, is_cuda, is_interpreter, numpy_random,
                                          str_to_triton_dtype, to_numpy, to_triton)


    @triton.jit
    def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    @pytest.mark.parametrize("dtype", dtypes)
    def test_copy(dtype):
        assert is_interpreter() and not is_cuda()
        assert triton.__version__ == "3.6.0"
        assert str_to_triton_dtype(dtype) is getattr(tl, dtype)
        x = numpy_random(50, dtype, rs=np.random.RandomState(SEED))
        y = to_triton(np.zeros_like(x), "cpu")
        copy[(1,)](to_triton(x, "cpu"), y, 50, BLOCK=64)
        np.testing.assert_array_equal(to_numpy(y), x)


    def test_profiler_imports():
        import triton.profiler as proton
        import triton.profiler.viewer as proton_viewer
        import tegula
        assert proton is tegula.profiler and proton_viewer is tegula.profiler.viewer
''')


def _pytest(tmp_path, *args):
    seed = int.from_bytes(os.urandom(2), "little")
    (tmp_path / "test_triton_style.py").write_text(TEST_FILE.replace("SEED", str(seed)))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tegula.compat", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args, "test_triton_style.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def test_pytest_module_mode_runs_a_triton_test_file(tmp_path):
    result = _pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12 passed" in result.stdout


def test_xdist_workers_run_under_compat_too(tmp_path):
    result = _pytest(tmp_path, "-n", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12 passed" in result.stdout
