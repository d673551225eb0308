"""`kernel[grid](...)` launches on torch tensors inside `torch.compile(fullgraph=True)`,
without compat mode: no graph break (`torch._dynamo.explain`), results equal to eager
on fresh random inputs and sizes that are not multiples of the block, in-place writes
seen by torch, op schemas whose mutable arguments are the written-args analysis'.

CPU tensors run on the interpreter; the same tests run on CUDA tensors on a GPU machine.
Most cases compile with the `aot_eager` backend (Dynamo + AOTAutograd's
functionalization, fast); a few go through Inductor.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tegula as triton  # noqa: E402
import tegula.language as tl  # noqa: E402
from tegula.torch import launch_ops, wrap_triton  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@triton.jit
def scale_inplace_kernel(x_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr, SQUARE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=0.0)
    if SQUARE:
        x = x * x
    tl.store(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def scaled_copy(x_ptr, out, n, BLOCK: tl.constexpr = 32, DT: tl.constexpr = tl.float32, SCALE: tl.constexpr = 2):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x_ptr + offs, mask=mask).to(DT) * SCALE, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def axpy_autotuned(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["cols"])})
@triton.jit
def row_max_heuristic(x_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


def axpy(x, y, alpha=2.0):
    out = torch.empty_like(x)
    n = x.numel()
    axpy_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, alpha, BLOCK=64)
    return out


def fused(x, y):
    """torch ops around a launch: the launch's op sits inside one graph."""
    return torch.relu(axpy(x * 3, y)) + 1


def explain(fn, *args):
    torch._dynamo.reset()
    return torch._dynamo.explain(fn)(*args)


@pytest.mark.parametrize("device", DEVICES)
def test_no_graph_break(device):
    x, y = torch.randn(100, device=device), torch.randn(100, device=device)
    e = explain(fused, x, y)
    assert e.graph_break_count == 0, e.break_reasons
    assert e.graph_count == 1
    assert "torch.ops.tegula.axpy_kernel_" in e.graphs[0].code


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 37, 1000 + 3])
def test_compiled_matches_eager(device, n):
    compiled = torch.compile(fused, fullgraph=True, backend="aot_eager")
    for _ in range(2):  # fresh inputs each call: the compiled graph is reused
        x, y = torch.randn(n, device=device), torch.randn(n, device=device)
        torch.testing.assert_close(compiled(x, y), torch.relu(6 * x + y) + 1)


def test_no_recompiles_on_fresh_inputs_and_eager_launches_between():
    compiled = torch.compile(axpy, fullgraph=True, backend="aot_eager")
    compiled(torch.randn(100), torch.randn(100))
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(3):
            x, y = torch.randn(100), torch.randn(100)
            torch.testing.assert_close(compiled(x, y), 2 * x + y)
            torch.testing.assert_close(axpy(x, y), 2 * x + y)  # eager, between compiled calls


@pytest.mark.parametrize("device", DEVICES)
def test_inductor_matches_eager(device):
    compiled = torch.compile(fused, fullgraph=True)
    x, y = torch.randn(203, device=device), torch.randn(203, device=device)
    torch.testing.assert_close(compiled(x, y), fused(x, y))


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_write_into_an_input(device):
    def f(x, w):
        scale_inplace_kernel[(triton.cdiv(x.numel(), 32),)](x, x.numel(), 3.0, BLOCK=32)
        h = w.clone()
        scale_inplace_kernel[(triton.cdiv(h.numel(), 32),)](h, h.numel(), 0.5, BLOCK=32)
        return x + h

    compiled = torch.compile(f, fullgraph=True)
    x, w = torch.randn(77, device=device), torch.randn(77, device=device)
    x0, w0 = x.clone(), w.clone()
    out = compiled(x, w)
    torch.testing.assert_close(x, 3 * x0)  # the caller's tensor was written
    torch.testing.assert_close(w, w0)  # the clone was, not its source
    torch.testing.assert_close(out, 3 * x0 + 0.5 * w0)


@triton.jit
def histogram_kernel(x_ptr, bins_ptr, n, NBINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(bins_ptr + b, 1, mask=mask)


@pytest.mark.parametrize("device", DEVICES)
def test_atomic_updates_count_as_writes(device):
    def f(x, totals):
        bins = torch.zeros(8, dtype=torch.int32, device=x.device)
        grid = (triton.cdiv(x.numel(), 64),)
        histogram_kernel[grid](x, bins, x.numel(), NBINS=8, BLOCK=64)
        histogram_kernel[grid](x, totals, x.numel(), NBINS=8, BLOCK=64)  # into an input
        return bins * 1

    x = torch.randint(0, 8, (1000 + 3,), dtype=torch.int32, device=device)
    totals = torch.ones(8, dtype=torch.int32, device=device)
    want = torch.bincount(x.long(), minlength=8).to(torch.int32)
    got = torch.compile(f, fullgraph=True)(x, totals)
    assert torch.equal(got, want) and torch.equal(totals, want + 1)
    schema = next(str(op._schema) for (k, *_), op in launch_ops._ops.items() if k is histogram_kernel)
    assert "Tensor(a1!) bins_ptr" in schema and "Tensor x_ptr" in schema, schema


def test_schema_marks_exactly_the_written_arguments():
    axpy(torch.randn(10), torch.randn(10))
    torch.compile(axpy, fullgraph=True, backend="aot_eager")(torch.randn(10), torch.randn(10))
    schemas = [str(op._schema) for (k, *_), op in launch_ops._ops.items() if k is axpy_kernel]
    assert schemas
    for schema in schemas:
        assert "Tensor(a2!) out_ptr" in schema, schema
        assert "Tensor x_ptr" in schema and "Tensor y_ptr" in schema, schema
        assert "SymInt[] grid" in schema and "SymInt n" in schema and "float alpha" in schema


@pytest.mark.parametrize("device", DEVICES)
def test_grid_tuple_positional_constexpr_and_options(device):
    def f(x, square: bool):
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_sum_kernel[(rows,)](x, out, cols, x.stride(0), 64, square, num_warps=2)
        return out

    x = torch.randn(5, 50, device=device)
    for square in (False, True):
        e = explain(f, x, square)
        assert e.graph_break_count == 0, e.break_reasons
        got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, square)
        torch.testing.assert_close(got, (x * x if square else x).sum(1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_shapes(device):
    compiled = torch.compile(axpy, fullgraph=True, backend="aot_eager", dynamic=True)
    for n in (5, 130, 1000 + 3):
        x, y = torch.randn(n, device=device), torch.randn(n, device=device)
        torch.testing.assert_close(compiled(x, y), 2 * x + y)


@pytest.mark.parametrize("device", DEVICES)
def test_parameter_defaults(device):
    """Defaults fill the grid's meta (BLOCK) and the kernel's own constexprs (a tl dtype)."""
    def f(x):
        out = torch.empty_like(x)
        scaled_copy[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        return out

    x = torch.randn(70, device=device)
    assert explain(f, x).graph_break_count == 0
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(x), 2 * x)

    def g(x):  # a tl dtype passed as a constexpr
        out = torch.empty(x.shape, device=x.device, dtype=torch.float16)
        scaled_copy[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16, DT=tl.float16, SCALE=3)
        return out

    assert explain(g, x).graph_break_count == 0
    torch.testing.assert_close(torch.compile(g, fullgraph=True, backend="aot_eager")(x), (3 * x).half())


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.mark.parametrize("device", DEVICES)
def test_reinterpreted_tensors(device):
    """`tegula.reinterpret(x, dtype)` arguments: the op takes x and re-wraps it."""
    def f(x):
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 32),)](triton.reinterpret(x, tl.int32), triton.reinterpret(out, tl.int32),
                                                    x.numel(), BLOCK=32)
        return out + 0

    x = torch.randn(100, device=device)
    assert explain(f, x).graph_break_count == 0
    assert torch.equal(torch.compile(f, fullgraph=True, backend="aot_eager")(x), x)


def test_constexpr_from_an_int_argument_that_varies():
    """After a few calls Dynamo makes a varying int argument symbolic; as a constexpr it
    is specialized again (one graph per value), never a graph break."""
    def f(x, y, alpha, block):
        out = torch.empty_like(x)
        axpy_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), alpha, BLOCK=block)
        return out

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    for n, alpha, block in [(10, 1.0, 16), (20, 2.0, 32), (30, 3.0, 64), (41, 4.0, 16)]:
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(compiled(x, y, alpha, block), alpha * x + y)


@pytest.mark.parametrize("device", DEVICES)
def test_autotuned_kernel(device):
    def f(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        axpy_autotuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, 2.0)
        return out

    x, y = torch.randn(150, device=device), torch.randn(150, device=device)
    assert explain(f, x, y).graph_break_count == 0
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(x, y), 2 * x + y)


@pytest.mark.parametrize("device", DEVICES)
def test_heuristic_kernel(device):
    def f(x):
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_max_heuristic[(rows,)](x, out, cols, x.stride(0))
        return out

    x = torch.randn(4, 37, device=device)
    assert explain(f, x).graph_break_count == 0
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(x), x.amax(1))


def test_wrap_triton_under_make_fx():
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, y):
        out = torch.empty_like(x)
        wrap_triton(axpy_kernel)[(2,)](x, y, out, x.numel(), 2.0, BLOCK=64)
        return out

    x, y = torch.randn(100), torch.randn(100)
    gm = make_fx(f, tracing_mode="fake")(x, y)
    assert "torch.ops.tegula.axpy_kernel_" in gm.code
    torch.testing.assert_close(gm(x, y), 2 * x + y)
    torch.testing.assert_close(f(x, y), 2 * x + y)  # eager: a direct launch
    assert explain(f, x, y).graph_break_count == 0
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(x, y), 2 * x + y)


@pytest.mark.parametrize("strict", [False, True])
def test_torch_export(strict):
    class Model(torch.nn.Module):
        def forward(self, x, y):
            return fused(x, y)

    x, y = torch.randn(50), torch.randn(50)
    ep = torch.export.export(Model(), (x, y), strict=strict)
    assert "torch.ops.tegula.axpy_kernel_" in ep.graph_module.code
    x, y = torch.randn(50), torch.randn(50)
    torch.testing.assert_close(ep.module()(x, y), torch.relu(6 * x + y) + 1)


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"  # a file: @jit reads its kernels' source
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)


def test_torch_imported_after_the_kernels_are_defined(tmp_path):
    r = _run("""
        import tegula as triton, tegula.language as tl

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        import torch

        def f(x):
            k[(triton.cdiv(x.numel(), 16),)](x, x.numel(), BLOCK=16)
            return x * 2

        x = torch.zeros(20)
        e = torch._dynamo.explain(f)(x.clone())
        assert e.graph_break_count == 0, e.break_reasons
        out = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
        assert torch.equal(out, torch.full((20,), 2.0)) and torch.equal(x, torch.ones(20))
        print("OK")
    """, tmp_path)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


def test_import_stays_cheap(tmp_path):
    """With torch loaded, `import tegula` sets the hook up without importing Dynamo
    (seconds) and an eager launch does not import it either."""
    r = _run("""
        import sys
        import torch
        import tegula as triton, tegula.language as tl

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        x = torch.zeros(20)
        k[(2,)](x, 20, BLOCK=16)
        assert torch.equal(x, torch.ones(20))
        assert "tegula.torch" in sys.modules and "torch._dynamo" not in sys.modules
        print("OK")
    """, tmp_path)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


def test_tegula_without_torch(tmp_path):
    r = _run("""
        import sys
        sys.modules["torch"] = None  # import torch raises ImportError
        import numpy as np
        import tegula as triton, tegula.language as tl

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        x = np.zeros(20, dtype=np.float32)
        k[(2,)](x, 20, BLOCK=16)
        assert (x == 1).all()
        assert "tegula.torch" not in sys.modules
        print("OK")
    """, tmp_path)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
