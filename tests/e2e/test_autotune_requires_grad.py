"""An autotuned kernel launched on torch tensors that require grad (as Triton's fused
attention tutorial does inside a torch.autograd.Function): the tuner's argument snapshot
must not ask such a CUDA tensor for its __cuda_array_interface__ (torch raises)."""
from __future__ import annotations

import pytest

import tegula as triton
import tegula.language as tl

torch = pytest.importorskip("torch")


@triton.autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def _scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_autotuned_launch_on_tensors_that_require_grad(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    x = torch.randn(1000, device=device, requires_grad=True)
    out = torch.empty(1000, device=device)
    _scale[lambda m: (triton.cdiv(1000, m["BLOCK"]),)](x, out, 1000)
    torch.testing.assert_close(out, x.detach() * 2)
