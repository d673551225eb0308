"""Translation validation of the example kernels: every kernel the examples launch
computes bit-identical results through the interpreter before optimization and after
each pass of the `tir_opt` pipeline (applied cumulatively, in pipeline order).

The hook sits where the interpreter backend turns a compiled kernel into a program:
each launch first runs every pass-prefix variant of the kernel's unoptimized IR
(`asm["tir"]`) on the launch's own arrays, restoring their contents in between, and
compares every array byte for byte with the unoptimized run; then the real launch runs.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tegula.backends.interpreter as interpreter
from tegula.ir.parser import parse_ir
from tegula.passes import PIPELINES, run_pipeline
from tegula.runtime.interpreter_backend import InterpreterBackend

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VALIDATED: list[str] = []


def _variants(tir_text: str) -> list[tuple[str, object]]:
    names = [p if isinstance(p, str) else p.__name__ for p in PIPELINES["tir_opt"]]
    out = [("tir", parse_ir(tir_text))]
    for i in range(len(names)):
        out.append((" > ".join(names[: i + 1]), run_pipeline(parse_ir(tir_text), names[: i + 1])))
    return out


class _ValidatingProgram:
    def __init__(self, real, variants, name, compile_kernel):
        self.real = real
        self.variants = [(label, compile_kernel(k)) for label, k in variants]
        self.name = name

    def run(self, grid, args):
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        originals = [a.copy() for a in arrays]
        reference = None
        for label, program in self.variants:
            for a, o in zip(arrays, originals):
                a[...] = o
            program.run(grid, args)
            result = [a.tobytes() for a in arrays]
            if reference is None:
                reference = result
            else:
                for i, (got, want) in enumerate(zip(result, reference)):
                    assert got == want, f"kernel {self.name}: array {i} differs after passes [{label}]"
        for a, o in zip(arrays, originals):
            a[...] = o
        VALIDATED.append(self.name)
        self.real.run(grid, args)


@pytest.fixture
def validate_passes(monkeypatch):
    real_load = InterpreterBackend.load
    real_compile = interpreter.compile_kernel

    def load(self, compiled, device):
        variants = _variants(compiled.asm["tir"])

        def compile_kernel(kernel, debug=False):
            return _ValidatingProgram(real_compile(kernel, debug=debug), variants, compiled.metadata.name,
                                     real_compile)

        monkeypatch.setattr(interpreter, "compile_kernel", compile_kernel)
        try:
            return real_load(self, compiled, device)
        finally:
            monkeypatch.setattr(interpreter, "compile_kernel", real_compile)

    monkeypatch.setattr(InterpreterBackend, "load", load)
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    VALIDATED.clear()
    yield VALIDATED


@pytest.mark.parametrize("stem", ["01_vector_add", "02_fused_softmax", "03_matmul", "05_layer_norm",
                                  "06_attention_forward"])
def test_example_kernels_survive_every_pass(stem, validate_passes, capsys):
    spec = importlib.util.spec_from_file_location(f"tv_{stem}", EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(small=True)
    assert validate_passes, "no kernel launch went through the interpreter"
