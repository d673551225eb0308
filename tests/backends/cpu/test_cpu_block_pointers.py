"""Block pointers on the compiled CPU backend (which runs `lower_block_pointers` before
lowering): every pattern of `block_pointer_kernels` — for, if, while, stores, bool,
each dimension checked, zero and NaN padding — launched with `kernel[grid]` gives what
the interpreter gives running the ops themselves, and an unchecked access past its
buffer is the interpreter's located report."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tegula.backends.cpu.backend import CpuProgram
from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.errors import OutOfBoundsError
from tegula.runtime.compiler import optimized_ir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "passes"))
from block_pointer_kernels import CASES, inputs  # noqa: E402


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_backend_matches_the_interpreter_on_the_ops(cpu, name):
    fn, sig, cx = CASES[name]
    grid, args = inputs(name, np.random.default_rng(11))
    want = _copies(args)
    execute(optimized_ir(ASTSource(fn, signature=sig, constexprs=cx)), grid, want)
    got = _copies(args)
    fn.clear_cache()
    compiled = CpuProgram.compiled
    fn[grid](*got, **cx)
    assert CpuProgram.compiled > compiled
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            if name in ("matmul", "row_sums"):  # sums vectorized in another order
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(g, w)


def test_unchecked_block_past_its_buffer_is_reported(cpu):
    fn, _sig, cx = CASES["pad_zero"]
    fn.clear_cache()
    with pytest.raises(OutOfBoundsError, match="out-of-bounds store through pointer argument 'out_ptr'") as info:
        fn[(3,)](np.zeros(20, np.float32), np.zeros(32, np.float32), 10, 2, **cx)
    assert "block_pointer_kernels.py" in str(info.value) and "program id" in str(info.value)
