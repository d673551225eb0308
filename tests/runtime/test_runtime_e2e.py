"""The runtime with the real frontend, passes and interpreter: launches on numpy arrays
and CPU tensors, compile counts, dump and override, and located errors."""
from __future__ import annotations

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.compiler import ASTSource, compile
from tegula.errors import CompilationError, KernelArgumentError
from tegula.runtime import compiler as driver


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@pytest.fixture(autouse=True)
def _fresh_kernels():
    for k in (add_kernel, scale_kernel):
        k.clear_cache()


@pytest.fixture
def frontend_count(monkeypatch):
    calls = []
    real = driver._frontend_build

    def counting(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "_frontend_build", counting)
    return calls


def test_add_numpy(frontend_count):
    rng = np.random.default_rng(0)
    n = 1000
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.empty_like(x)
    k = add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    np.testing.assert_array_equal(out, x + y)
    assert k.metadata.written_args == ("out_ptr",)
    assert "kernel @add_kernel" in k.asm["tir"] and "kernel @add_kernel" in k.asm["tir_opt"]
    add_kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, out, n, BLOCK=256)
    assert len(frontend_count) == 1


def test_add_torch_cpu_and_bf16():
    torch = pytest.importorskip("torch")
    x, y = torch.rand(300), torch.rand(300)
    out = torch.empty(300)
    add_kernel[(3,)](x, y, out, 300, BLOCK=128)
    torch.testing.assert_close(out, x + y)
    xb, yb = x.to(torch.bfloat16), y.to(torch.bfloat16)
    ob = torch.empty(300, dtype=torch.bfloat16)
    add_kernel[(3,)](xb, yb, ob, 300, BLOCK=128)
    torch.testing.assert_close(ob, (xb.float() + yb.float()).to(torch.bfloat16))


def test_specializations_compile_separately(frontend_count):
    x = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    scale_kernel[(1,)](x, out, 64, BLOCK=64)
    scale_kernel[(1,)](x, out, 48, BLOCK=64)      # still divisible by 16
    scale_kernel[(1,)](x, out, 50, BLOCK=64)
    scale_kernel[(1,)](x, out, 1, BLOCK=64)
    scale_kernel[(1,)](x.astype(np.float16), out.astype(np.float16), 64, BLOCK=64)
    assert [sig["n"] for sig in frontend_count] == ["i32", "i32", "constexpr", "i32"]
    assert len(frontend_count) == 4


def test_float_for_a_pointer_names_the_argument():
    out = np.zeros(16, np.float32)
    with pytest.raises(CompilationError) as info:
        add_kernel[(1,)](1.5, out, out, 16, BLOCK=16)
    text = str(info.value)
    assert f"{__file__}:" in text
    assert "'x_ptr' is a scalar (fp32, from a Python float)" in text


def test_dump_and_override(monkeypatch, tmp_path):
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    monkeypatch.setenv("TEGULA_DUMP_DIR", str(tmp_path / "dump"))
    k = scale_kernel[(1,)](x, out, 16, BLOCK=16)
    np.testing.assert_array_equal(out, x * 2)
    dumped = (tmp_path / "dump" / k.hash / "scale_kernel.tir_opt").read_text()
    assert dumped == k.asm["tir_opt"] and "2.0" in dumped

    monkeypatch.delenv("TEGULA_DUMP_DIR")
    override = tmp_path / "override"
    override.mkdir()
    (override / "scale_kernel.tir_opt").write_text(dumped.replace("2.0", "3.0"))
    monkeypatch.setenv("TEGULA_OVERRIDE_DIR", str(override))
    scale_kernel.clear_cache()
    scale_kernel[(1,)](x, out, 16, BLOCK=16)
    np.testing.assert_array_equal(out, x * 3)


def test_compile_then_launch():
    src = ASTSource(scale_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                    constexprs={"BLOCK": 32})
    k = compile(src)
    x = np.arange(40, dtype=np.float32)
    out = np.zeros(40, np.float32)
    if k.metadata.target.backend == "cuda":
        # Without a target, compile() targets the active device, as Triton does: with a
        # GPU present that is the GPU, so the launch takes GPU arrays.
        import torch

        x_dev, out_dev = torch.from_numpy(x).cuda(), torch.from_numpy(out).cuda()
        k[(2,)](x_dev, out_dev, 40)
        out = out_dev.cpu().numpy()
    else:
        k[(2,)](x, out, 40)
    np.testing.assert_array_equal(out, x * 2)


def test_interpreter_errors_pass_through():
    x = np.zeros(8, np.float32)
    with pytest.raises(IndexError):
        scale_kernel[(1,)](x, x, 16, BLOCK=16)   # n larger than the arrays: out of bounds


def test_wrong_argument_count():
    with pytest.raises(KernelArgumentError, match=r"missing 'n'.*\(x_ptr, out_ptr, n, BLOCK: constexpr\)"):
        scale_kernel[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32), BLOCK=4)
