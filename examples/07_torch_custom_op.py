"""A fused PyTorch operator with tegula kernels: forward, backward, torch.compile.

SwiGLU's gate, `out = a * silu(b)`, in one pass over memory each way: a forward kernel,
and a backward kernel that produces both gradients at once. `tegula.torch.triton_op`
makes each a torch operator (schema from the type hints, fake implementation from the
function itself), `register_autograd` connects them, and the operator then works in
eager mode, under `torch.autograd.gradcheck` (float64: the interpreter runs it) and inside
`torch.compile(fullgraph=True)` with no graph break. A bare `kernel[grid](...)` launch
in a compiled function needs no wrapper at all: `scale_inplace` below writes into its
argument, and tegula tells torch so (its written-args analysis).

    python examples/07_torch_custom_op.py            # checks, on the GPU when torch sees one
    python examples/07_torch_custom_op.py --small    # a quick run
"""
import argparse
import sys

import torch

import tegula as triton
import tegula.language as tl
from tegula.torch import triton_op, wrap_triton


@triton.jit
def swiglu_fwd_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * b * tl.sigmoid(b), mask=mask)


@triton.jit
def swiglu_bwd_kernel(a_ptr, b_ptr, g_ptr, da_ptr, db_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    s = tl.sigmoid(b)
    tl.store(da_ptr + offs, g * b * s, mask=mask)
    tl.store(db_ptr + offs, g * a * s * (1 + b * (1 - s)), mask=mask)


@triton.jit
def scale_kernel(x_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def _grid(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


@triton_op("tegula_examples::swiglu", mutates_args=())
def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    wrap_triton(swiglu_fwd_kernel)[_grid(a.numel())](a, b, out, a.numel(), BLOCK=256)
    return out


@triton_op("tegula_examples::swiglu_backward", mutates_args=())
def swiglu_backward(a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a, b, grad = a.contiguous(), b.contiguous(), grad.contiguous()
    da, db = torch.empty_like(a), torch.empty_like(b)
    wrap_triton(swiglu_bwd_kernel)[_grid(a.numel())](a, b, grad, da, db, a.numel(), BLOCK=256)
    return da, db


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    return swiglu_backward(a, b, grad)


swiglu.register_autograd(_backward, setup_context=_setup_context)


def scale_inplace(x, factor):
    """x *= factor by a bare launch: inside torch.compile it is a mutating op on x. Like
    any kernel launch it is invisible to autograd: use it on tensors outside the graph
    of gradients (or wrap it in an operator with a backward, as swiglu is)."""
    scale_kernel[_grid(x.numel())](x, x.numel(), factor, BLOCK=128)
    return x


def reference(a, b):
    return a * torch.nn.functional.silu(b)


def mlp_gate(a, b, bias):
    """A small compiled region: torch ops around the custom op and a bare launch."""
    shift = scale_inplace(bias.clone(), 0.5)
    return (swiglu(a + shift, b) * 2).sum(-1)


def main(small=False, device=None):
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    ok = True

    # 1. eager forward + backward against torch, on a size that is not a multiple of BLOCK
    n = 1000 if small else 100_003
    a = torch.randn(n, device=device, requires_grad=True)
    b = torch.randn(n, device=device, requires_grad=True)
    out = swiglu(a, b)
    out.backward(torch.ones_like(out))
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ref = reference(a2, b2)
    ref.backward(torch.ones_like(ref))
    for what, got, want in (("forward", out, ref), ("grad a", a.grad, a2.grad), ("grad b", b.grad, b2.grad)):
        good = torch.allclose(got, want, atol=1e-5, rtol=1e-4)
        ok &= good
        print(f"eager {what:8s} {'OK' if good else 'MISMATCH'}")

    # 2. gradcheck in float64 (small: numerical Jacobians launch the kernels many times)
    a64 = torch.randn(13, dtype=torch.float64, device=device, requires_grad=True)
    b64 = torch.randn(13, dtype=torch.float64, device=device, requires_grad=True)
    good = torch.autograd.gradcheck(swiglu, (a64, b64), eps=1e-6, atol=1e-5)
    ok &= good
    print(f"gradcheck       {'OK' if good else 'MISMATCH'}")

    # 3. torch.compile(fullgraph=True): forward and backward, against eager torch
    rows, cols = (3, 50) if small else (64, 1000)
    compiled = torch.compile(mlp_gate, fullgraph=True)
    x = torch.randn(rows, cols, device=device, requires_grad=True)
    y = torch.randn(rows, cols, device=device, requires_grad=True)
    bias = torch.randn(cols, device=device)
    got = compiled(x, y, bias)
    got.sum().backward()
    x2, y2 = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    want = (reference(x2 + 0.5 * bias, y2) * 2).sum(-1)
    want.sum().backward()
    for what, g, w in (("forward", got, want), ("grad a", x.grad, x2.grad), ("grad b", y.grad, y2.grad)):
        good = torch.allclose(g, w, atol=1e-4, rtol=1e-4)
        ok &= good
        print(f"compiled {what:7s} {'OK' if good else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="small sizes, a quick run")
    args = parser.parse_args()
    sys.exit(0 if main(small=args.small) else 1)
