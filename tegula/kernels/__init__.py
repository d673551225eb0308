"""Reusable tile kernels written in tegula's language, importable by users.

Everything under `tegula.kernels` is ordinary user code: it imports only tegula's public
surface (`tegula` and `tegula.language`), exactly as a kernel author's own module would,
and torch only lazily, where a host wrapper needs it. It is a library of kernels worth
not rewriting, and a worked example of writing them well.

- `attention`: fused attention (FlashAttention-2 forward and backward) with
  FlexAttention-style score and mask modifications and block sparsity
  (docs/attention.md).
"""
from tegula.kernels import mods
from tegula.kernels.attention import attention
from tegula.kernels.flex import BlockMask, MaskMod, ScoreMod, create_block_mask

__all__ = ["attention", "BlockMask", "MaskMod", "ScoreMod", "create_block_mask", "mods"]
