"""The compiler driver: ASTSource, compile(), CompiledKernel, metadata, dump/override."""
from __future__ import annotations

import os

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.compiler import ASTSource, CompiledKernel, IRSource, compile
from tegula.errors import CompilationError, KernelArgumentError
from tegula.ir.core import ArgAttrs, Loc
from tegula.runtime import compiler as driver
from tegula.runtime.jit import jit


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 64):
    pass


def test_astsource_normalizes_triton_spellings():
    src = ASTSource(add_kernel, {0: "*fp32", "y_ptr": "*fp32", (2,): "*fp32", "n": "i32"},
                    constexprs={(4,): 128}, attrs={(0,): [["tt.divisibility", 16]], "n": "D", 1: 16})
    assert src.signature == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                             "BLOCK": "constexpr"}
    assert src.constexprs == {"BLOCK": 128}
    assert src.attrs == {"x_ptr": ArgAttrs(16), "y_ptr": ArgAttrs(16), "out_ptr": ArgAttrs(1),
                         "n": ArgAttrs(16)}


def test_astsource_defaults_bool_and_errors():
    src = ASTSource(add_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*u1", "n": "u1"})
    assert src.constexprs == {"BLOCK": 64}                     # the default value
    assert src.signature["n"] == "i1" and src.signature["out_ptr"] == "*i1"
    with pytest.raises(KernelArgumentError, match="lacks the type of: out_ptr, n"):
        ASTSource(add_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16"})
    with pytest.raises(KernelArgumentError, match="no parameter 'zz'"):
        ASTSource(add_kernel, {"zz": "i32"})
    with pytest.raises(TypeError):
        ASTSource(lambda x: x, {})


def test_compile_without_launching(fake):
    src = ASTSource(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                    constexprs={"BLOCK": 256})
    k = compile(src, options={"num_warps": 2, "not_an_option": 1})
    assert isinstance(k, CompiledKernel) and fake.launches == []
    assert set(k.asm) == {"tir", "tir_opt", "fakeasm"}
    assert "opt=True" in k.asm["tir_opt"] and "opt=False" in k.asm["tir"]
    md = k.metadata
    got = (md.name, md.num_warps, md.num_stages, md.num_ctas, md.shared, md.n_regs)
    assert got == ("add_kernel", 2, 3, 1, 128, 32)
    assert md.written_args == ("out_ptr",) and md.hash == k.hash and len(k.hash) == 64
    assert md.arg_names == ["x_ptr", "y_ptr", "out_ptr", "n"] and md.target.backend == "interpreter"
    assert md._asdict()["name"] == "add_kernel"


def test_compile_for_an_explicit_target(fake, monkeypatch):
    cuda = fake.enable_cuda(monkeypatch)
    src = ASTSource(add_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16", "n": "i32"})
    k = compile(src, target=GPUTarget("cuda", 90, 32))
    assert k.metadata.target == GPUTarget("cuda", 90, 32) and cuda.compiles[0][2].arch == 90


def test_compiled_kernel_launches_directly(fake):
    x, y, out = (np.zeros(8, np.float32) for _ in range(3))
    src = ASTSource(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"})
    k = compile(src)
    k[(2,)](x, y, out, 8)                 # runtime arguments only
    k.run((1, 2), x, y, out, 8, 64)       # every parameter
    launched = [(g, v[:4]) for _, g, v in fake.launches]
    assert launched == [((2, 1, 1), (x, y, out, 8)), ((1, 2, 1), (x, y, out, 8))]
    with pytest.raises(KernelArgumentError, match="takes its 4 runtime arguments"):
        k[(1,)](x, y)


def test_dump_dir(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("TEGULA_DUMP_DIR", str(tmp_path))
    x = np.zeros(8, np.float32)
    k = add_kernel[(1,)](x, x, x, 8)
    files = sorted(os.listdir(tmp_path / k.hash))
    assert files == ["add_kernel.fakeasm", "add_kernel.tir", "add_kernel.tir_opt"]
    assert (tmp_path / k.hash / "add_kernel.tir_opt").read_text() == k.asm["tir_opt"]


@pytest.mark.parametrize("layout", ["by_hash", "by_name"])
def test_override_dir(fake, monkeypatch, tmp_path, layout):
    x = np.zeros(8, np.float32)
    k = add_kernel[(1,)](x, x, x, 8)
    add_kernel.clear_cache()
    where = tmp_path / k.hash if layout == "by_hash" else tmp_path
    where.mkdir(exist_ok=True)
    (where / "add_kernel.tir_opt").write_text("kernel @replaced_tir_opt")
    (where / "add_kernel.fakeasm").write_text("my asm")
    monkeypatch.setenv("TEGULA_OVERRIDE_DIR", str(tmp_path))
    k2 = add_kernel[(1,)](x, x, x, 8)
    assert k2.asm["tir_opt"] == "kernel @replaced_tir_opt" and k2.asm["fakeasm"] == "my asm"
    assert fake.parsed == ["kernel @replaced_tir_opt"]
    assert fake.host.compiles[-1][0].from_text == "kernel @replaced_tir_opt"   # the backend got the override


def test_tir_override_is_parsed_then_optimized(fake, monkeypatch, tmp_path):
    (tmp_path / "add_kernel.tir").write_text("kernel @from_tir")
    monkeypatch.setenv("TEGULA_OVERRIDE_DIR", str(tmp_path))
    x = np.zeros(8, np.float32)
    k = add_kernel[(1,)](x, x, x, 8)
    assert k.asm["tir"] == "kernel @from_tir" and fake.parsed == ["kernel @from_tir"]
    assert "opt=True" in k.asm["tir_opt"]


def test_ir_override_launch_option(fake, tmp_path):
    path = tmp_path / "mine.tir_opt"
    path.write_text("kernel @override_option")
    x = np.zeros(8, np.float32)
    k = add_kernel[(1,)](x, x, x, 8, ir_override=str(path))
    assert k.asm["tir_opt"] == "kernel @override_option"


def test_ir_source_file(fake, tmp_path):
    path = tmp_path / "k.tir"
    path.write_text("kernel @from_file")
    k = compile(str(path))
    assert k.name == "from_file" and k.asm["tir"] == "kernel @from_file"
    assert isinstance(IRSource(str(path)).hash(), str)
    with pytest.raises(ValueError, match=r"expected a \.tir or \.tir_opt file"):
        compile(str(tmp_path / "k.txt"))


def test_float_passed_for_a_pointer_names_the_argument(fake, monkeypatch, tmp_path):
    kernel_file = tmp_path / "kern.py"
    kernel_file.write_text("def k(x_ptr, n):\n    tl.store(x_ptr + n, 1.0)\n")

    def failing_frontend(fn, signature, constexprs, attrs, options):
        raise CompilationError("Unsupported ptr type fp32 in `tl.store`: expected a pointer or a tensor of "
                               "pointers", Loc(str(kernel_file), 2, 4, 27))

    monkeypatch.setattr(driver, "_frontend_build", failing_frontend)
    with pytest.raises(CompilationError) as info:
        add_kernel[(1,)](1.5, np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    text = str(info.value)
    assert text.startswith(f"{kernel_file}:2:5: error: Unsupported ptr type")
    assert "note: in this launch 'x_ptr' is a scalar (fp32, from a Python float); pass" in text


def test_public_names():
    assert tegula.compile is compile
    assert tegula.cdiv(10, 4) == 3 and tegula.cdiv(8, 4) == 2
    assert [tegula.next_power_of_2(n) for n in (0, 1, 2, 3, 5, 64, 65)] == [0, 1, 2, 4, 8, 64, 128]
    assert tegula.__version__ == "0.1.0"
    from tegula.runtime import JITFunction, KernelInterface, driver

    assert isinstance(add_kernel, JITFunction) and isinstance(add_kernel, KernelInterface)
    assert hasattr(driver, "active")
