"""Translation validation of the CPU backend's lowering against the interpreter on the
example corpus: every launch of an example kernel on the compiled CPU backend first
runs the interpreter on copies of the launch's arrays (from the same optimized IR),
then the CPU program, and compares every array: integer arrays byte for byte, float
arrays bitwise where the kernel only does correctly rounded elementwise work (vector
add) and otherwise within a tolerance covering docs/numerics.md's order-dependent
bounds (sums in another order, a dot's chain of FMAs, the inline exp's ulp): relative
1e-4, or two ulps of a 16-bit result type (which may then round the other way)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tegula.backends.cpu import backend as cpu_backend
from tegula.backends.interpreter import compile_kernel as interpret
from tegula.ir.parser import parse_ir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BITWISE = {"01_vector_add"}


class _Checked(list):
    """The names of the kernels validated; `bitwise`: compare float arrays exactly."""
    bitwise = False


@pytest.fixture
def validate_cpu(monkeypatch):
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        pytest.skip("the examples run on the GPU itself here")
    monkeypatch.setenv("TEGULA_CPU_BACKEND", "1")
    monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    checked = _Checked()

    def load(self, compiled, device):
        md = compiled.metadata
        program = cpu_backend.CpuProgram.from_object(compiled.asm["obj"], md.__dict__)
        kernel = compiled.ir if compiled.ir is not None else parse_ir(compiled.asm["tir_opt"])
        reference = interpret(kernel, debug=bool(md.debug))
        real_run = program.run

        def run(grid, args):
            arrays = [a for a in args if isinstance(a, np.ndarray)]
            originals = [a.copy() for a in arrays]
            reference.run(grid, args)
            want = [a.copy() for a in arrays]
            for a, o in zip(arrays, originals):
                a[...] = o
            real_run(grid, args)
            for i, (got, exp) in enumerate(zip(arrays, want)):
                what = f"kernel {compiled.metadata.name}: array {i}"
                if got.dtype.kind != "f" or checked.bitwise:
                    assert got.tobytes() == exp.tobytes(), what
                else:
                    # a 16-bit result may round the other way: one ulp of its type more; an
                    # element that cancels (attention's output near 0) keeps the absolute error of
                    # its largest terms: two ulps of the array's largest magnitude
                    eps = float(np.finfo(got.dtype).eps)
                    scale = float(np.max(np.abs(exp), initial=0.0, where=np.isfinite(exp)))
                    np.testing.assert_allclose(got.astype(np.float64), exp.astype(np.float64),
                                               rtol=max(1e-4, 2 * eps), atol=max(1e-5, 2 * eps * scale), err_msg=what)
            checked.append(compiled.metadata.name)
        program.run = run
        return program.launcher(md)

    monkeypatch.setattr(cpu_backend.CpuBackend, "load", load)
    return checked


@pytest.mark.parametrize("stem", ["01_vector_add", "02_fused_softmax", "03_matmul", "05_layer_norm",
                                  "06_attention_forward"])
def test_example_kernels_match_the_interpreter_on_cpu(stem, validate_cpu):
    spec = importlib.util.spec_from_file_location(f"cpu_tv_{stem}", EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    validate_cpu.bitwise = stem in BITWISE
    assert module.main(small=True)
    assert validate_cpu, "no kernel launch went through the CPU backend"
