"""`triton._C.libtriton.nvidia`: the cuBLASLt handle Triton's tutorials compare against
(`nvidia.cublas.CublasLt(workspace).matmul(a, b, c)`: c = a @ b.T, b given as [N, K]).

Triton binds cuBLASLt from C++; tegula reaches cuBLAS(Lt) through torch, which runs the
same library kernels: `matmul` for fp16/bf16/fp32, and fp8 (e4m3/e5m2) through
`torch._scaled_mm` with unit scales (what Triton's binding computes for fp8 operands).
The workspace is kept for the API; torch manages cuBLAS's own.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class CublasLt:
    def __init__(self, workspace: Any) -> None:
        self.workspace = workspace

    def matmul(self, a: Any, b: Any, c: Any) -> None:
        """c = a @ b.T for a [M, K] and b [N, K] (c [M, N] is written in place)."""
        import torch

        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or tuple(c.shape) != (a.shape[0], b.shape[0]):
            raise ValueError(f"CublasLt.matmul: a [M, K], b [N, K], c [M, N]; got {tuple(a.shape)}, "
                             f"{tuple(b.shape)}, {tuple(c.shape)}")
        if a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            one = torch.ones((), device=a.device, dtype=torch.float32)
            c.copy_(torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=c.dtype))
        else:
            torch.matmul(a, b.T, out=c)

    def fp8_matmul(self, a: Any, b: Any, c: Any) -> None:
        self.matmul(a, b, c)


cublas = SimpleNamespace(CublasLt=CublasLt)
