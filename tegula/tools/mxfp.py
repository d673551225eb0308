"""Microscaling (OCP MX) element and scale tensors on the host, Triton's
`triton.tools.mxfp`: what block-scaled matmul code (Triton's tutorial 10) builds its
inputs and references with. Needs torch.

- `MXFP4Tensor`: FP4 E2M1 values (a sign, two exponent bits with bias 1, one mantissa
  bit: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6), one 4-bit code per element in a uint8
  tensor `data`. Built from floats (`MXFP4Tensor(x)`: nearest value, ties to the even
  code, saturating at ±6, NaN to +6 as the format has none) or random
  (`MXFP4Tensor(size=..., device=...).random()`); `to(dtype)` decodes;
  `to_packed_tensor(dim)` puts two codes in a byte along `dim` (the even index in the
  low nibble), `unpack_packed_tensor` undoes it.
- `MXScaleTensor`: E8M0 scales (2**(e - 127) for e in 0..254, 255 is NaN), one byte per
  element in `data`. Built from positive floats (the nearest power of two in log2,
  clamped to the range; NaN, infinities and non-positive values to 255) or random
  (`.random(low, high)`: powers of two in [low, high]); `to(dtype)` decodes.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

# magnitude of each 3-bit E2M1 code (sign in bit 3)
_FP4_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E8M0_NAN = 255


def _torch():
    import torch

    return torch


class MXFP4Tensor:
    def __init__(self, data: Any = None, size: Optional[Sequence[int]] = None, device: Any = None):
        torch = _torch()
        if data is not None:
            self.data = self._encode(torch.as_tensor(data, device=device))
        elif size is not None:
            self.data = torch.zeros(tuple(size), dtype=torch.uint8, device=device)
        else:
            raise ValueError("MXFP4Tensor needs data (a float tensor) or a size")
        self.device = self.data.device
        self.size = tuple(self.data.shape)

    @staticmethod
    def _encode(x: Any) -> Any:
        torch = _torch()
        x = x.to(torch.float32)
        sign = (torch.signbit(x) & ~torch.isnan(x)).to(torch.uint8) << 3
        mag = x.abs().nan_to_num(nan=6.0, posinf=6.0).clamp(max=6.0)
        table = torch.tensor(_FP4_MAGNITUDES, dtype=torch.float32, device=x.device)
        dist = (mag.unsqueeze(-1) - table).abs()
        idx = dist.argmin(dim=-1)  # the lower of two equally near codes
        nxt = (idx + 1).clamp(max=7)
        near = dist.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        tie = (dist.gather(-1, nxt.unsqueeze(-1)).squeeze(-1) == near) & (nxt != idx)
        pick = torch.where(tie & (idx % 2 == 1), nxt, idx)  # ties to the even code
        return (pick.to(torch.uint8) | sign).to(torch.uint8)

    def random(self) -> "MXFP4Tensor":
        """Every element a uniformly random code (both zeros included)."""
        torch = _torch()
        self.data = torch.randint(0, 16, self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype: Any) -> Any:
        torch = _torch()
        table = torch.tensor(_FP4_MAGNITUDES, dtype=torch.float32, device=self.device)
        mag = table[(self.data & 7).long()]
        return torch.where((self.data & 8) != 0, -mag, mag).to(dtype)

    def to_packed_tensor(self, dim: int) -> Any:
        """Two codes per byte along `dim` (its size must be even): element 2i in the low
        nibble, 2i + 1 in the high one."""
        torch = _torch()
        dim = dim % self.data.dim()
        if self.data.shape[dim] % 2:
            raise ValueError(f"packing two FP4 values per byte needs an even size along dim {dim}, "
                             f"got {self.data.shape[dim]}")
        pairs = self.data.unflatten(dim, (-1, 2))
        packed = pairs.select(dim + 1, 0) | (pairs.select(dim + 1, 1) << 4)
        return packed.to(torch.uint8).contiguous()

    def unpack_packed_tensor(self, packed_tensor: Any, dim: int, original_shape: Sequence[int]) -> Any:
        """The codes `to_packed_tensor(dim)` packed, in a tensor of `original_shape`."""
        torch = _torch()
        dim = dim % packed_tensor.dim()
        low, high = packed_tensor & 0xF, packed_tensor >> 4
        both = torch.stack([low, high], dim=dim + 1).flatten(dim, dim + 1)
        return both.narrow(dim, 0, original_shape[dim]).reshape(tuple(original_shape)).to(torch.uint8)


class MXScaleTensor:
    def __init__(self, data: Any = None, size: Optional[Sequence[int]] = None, device: Any = None):
        torch = _torch()
        if data is not None:
            data = torch.as_tensor(data, device=device)
            self.data = data if data.dtype == torch.uint8 else self._encode(data)
        elif size is not None:
            self.data = torch.full(tuple(size), 127, dtype=torch.uint8, device=device)  # 1.0
        else:
            raise ValueError("MXScaleTensor needs data (positive floats or E8M0 bytes) or a size")
        self.device = self.data.device
        self.size = tuple(self.data.shape)

    @staticmethod
    def _encode(x: Any) -> Any:
        torch = _torch()
        x = x.to(torch.float64)
        bad = ~torch.isfinite(x) | (x <= 0)
        e = torch.round(torch.log2(torch.where(bad, torch.ones_like(x), x))) + 127
        e = e.clamp(0, 254).to(torch.uint8)
        return torch.where(bad, torch.full_like(e, _E8M0_NAN), e)

    def random(self, low: Optional[float] = None, high: Optional[float] = None) -> "MXScaleTensor":
        """Random scales, powers of two in [low, high] (default: the whole range)."""
        import math

        torch = _torch()
        lo = 0 if low is None else max(0, math.ceil(math.log2(low)) + 127)
        hi = 254 if high is None else min(254, math.floor(math.log2(high)) + 127)
        if lo > hi:
            raise ValueError(f"no power of two lies in [{low}, {high}]")
        self.data = torch.randint(lo, hi + 1, self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype: Any) -> Any:
        torch = _torch()
        values = torch.exp2(self.data.to(torch.float64) - 127)
        values = torch.where(self.data == _E8M0_NAN, torch.full_like(values, float("nan")), values)
        return values.to(dtype)
