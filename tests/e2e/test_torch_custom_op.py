"""`tegula.torch`'s wrappers: `triton_op` operators (with `register_autograd`),
`autograd_function`, and examples/07_torch_custom_op.py — eager, `gradcheck` in
float64 on small sizes (the interpreter runs float64), and inside
`torch.compile(fullgraph=True)` forward and backward. CPU tensors; the same tests run on
CUDA tensors on a GPU machine.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tegula as triton  # noqa: E402
import tegula.language as tl  # noqa: E402
from tegula.torch import autograd_function, triton_op  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module")
def example():
    """The example module, executed when this file's first test runs, not at collection.

    Executing a module that defines a `torch.library.custom_op` destroys an earlier
    definition of the same name (torch's `get_library_allowing_overwrite`), and
    test_cuda_examples_emulated executes examples/07 afresh. A module loaded here at
    collection time would then call its operator through a destroyed registration: CI saw
    `MemoryError: std::bad_alloc` from exactly that."""
    spec = importlib.util.spec_from_file_location("tegula_example_07_torch_custom_op",
                                                  EXAMPLES / "07_torch_custom_op.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@triton.jit
def softplus_fwd(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.log(1 + tl.exp(x)), mask=mask)


@triton.jit
def softplus_bwd(x_ptr, g_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(dx_ptr + offs, tl.load(g_ptr + offs, mask=mask) * tl.sigmoid(x), mask=mask)


@triton.jit
def add_into(acc_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(acc_ptr + offs, tl.load(acc_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask), mask=mask)


def _softplus_forward(x):
    out = torch.empty_like(x)
    softplus_fwd[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), BLOCK=32)
    return out


def _softplus_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    dx = torch.empty_like(x)
    softplus_bwd[(triton.cdiv(x.numel(), 32),)](x, grad.contiguous(), dx, x.numel(), BLOCK=32)
    return dx


softplus = autograd_function(_softplus_forward, _softplus_backward)


@triton_op("tegula_tests::accumulate_", mutates_args={"acc"})
def accumulate_(acc: torch.Tensor, x: torch.Tensor) -> None:
    add_into[(triton.cdiv(acc.numel(), 64),)](acc, x, acc.numel(), BLOCK=64)


@pytest.mark.parametrize("device", DEVICES)
def test_example_eager_gradcheck_and_compiled(device, capsys, example):
    assert example.main(small=True, device=device)
    out = capsys.readouterr().out
    assert "MISMATCH" not in out and out.count("OK") == 7


@pytest.mark.parametrize("device", DEVICES)
def test_triton_op_gradcheck_float64(device, example):
    a = torch.randn(11, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(11, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(example.swiglu, (a, b), eps=1e-6, atol=1e-5)


def test_triton_op_is_an_operator_with_a_fake(example):
    op = torch.ops.tegula_examples.swiglu.default
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b = torch.empty(5, 7), torch.empty(5, 7)
        out = op(a, b)
    assert out.shape == (5, 7) and out.dtype == torch.float32
    torch.library.opcheck(op, (torch.randn(9), torch.randn(9)), test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_function_eager_gradcheck_and_compiled(device):
    x = torch.randn(45, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(softplus, (x[:9].detach().requires_grad_(),), eps=1e-6, atol=1e-5)

    def f(x):
        return (softplus(x * 2) * 3).sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = torch.randn(45, device=device, requires_grad=True)
    compiled(x).backward()
    x2 = x.detach().clone().requires_grad_()
    f_ref = (torch.nn.functional.softplus(x2 * 2) * 3).sum()
    f_ref.backward()
    torch.testing.assert_close(x.grad, x2.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_mutating_triton_op_in_compile(device):
    def f(acc, x):
        accumulate_(acc, x)
        accumulate_(acc, x * 2)
        return acc.sum()

    acc, x = torch.randn(100, device=device), torch.randn(100, device=device)
    acc0 = acc.clone()
    total = torch.compile(f, fullgraph=True)(acc, x)
    torch.testing.assert_close(acc, acc0 + 3 * x)
    torch.testing.assert_close(total, (acc0 + 3 * x).sum())
