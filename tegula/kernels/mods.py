"""Ready-made score and mask mods for `tegula.kernels.attention`.

Each factory returns a ScoreMod or MaskMod: the `@triton.jit` function the kernels call,
the extra kernel arguments it reads (tensors, scalars), the derivative rule a score mod
needs for backward, and a torch `reference` on broadcast index tensors (b: [Z,1,1,1],
h: [1,H,1,1], q_idx: [1,1,N,1], kv_idx: [1,1,1,N]) for dense checks.

Mask mods: causal, sliding_window, document, dense (any mask given as a tensor). Score mods: alibi, relative_position
(additive: gradient 1), softcap (gradient 1 - tanh^2).
"""
from __future__ import annotations

import tegula as triton
import tegula.language as tl
from tegula.kernels.flex import MaskMod, ScoreMod
from tegula.language.extra import libdevice


@triton.jit
def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def causal() -> MaskMod:
    """A query sees keys at or before its position (as `causal=True`, but as a mask_mod,
    so it composes with a BlockMask built from it)."""
    return MaskMod(_causal, (), lambda b, h, q, kv: q >= kv)


@triton.jit
def _sliding_window_causal(b, h, q_idx, kv_idx, window):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < window)


@triton.jit
def _sliding_window_both(b, h, q_idx, kv_idx, window):
    d = q_idx - kv_idx
    return (d < window) & (d > -window)


def sliding_window(window: int, causal: bool = True) -> MaskMod:
    """Keys within `window` positions: q - window < kv <= q (causal), or |q - kv| < window."""
    if causal:
        return MaskMod(_sliding_window_causal, (window,), lambda b, h, q, kv: (q >= kv) & (q - kv < window))
    return MaskMod(_sliding_window_both, (window,), lambda b, h, q, kv: (q - kv).abs() < window)


@triton.jit
def _document(b, h, q_idx, kv_idx, doc_ids, stride_b):
    row = doc_ids + b * stride_b
    return tl.load(row + q_idx) == tl.load(row + kv_idx)


def document(doc_ids) -> MaskMod:
    """Jagged/packed sequences: a query sees only keys of its own document. `doc_ids` is
    an integer tensor [N] (every batch entry) or [Z, N], contiguous along N."""
    doc2 = doc_ids if doc_ids.dim() == 2 else doc_ids[None]
    stride_b = doc_ids.stride(0) if doc_ids.dim() == 2 else 0

    def reference(b, h, q, kv):
        rows = b % doc2.shape[0]
        return doc2[rows, q] == doc2[rows, kv]
    return MaskMod(_document, (doc_ids, stride_b), reference)


@triton.jit
def _dense(b, h, q_idx, kv_idx, allowed, stride_b, stride_h, stride_q):
    # 64-bit offsets: B*H*N*N entries pass 2**31 at long contexts
    row = allowed + b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h
    return tl.load(row + q_idx.to(tl.int64) * stride_q + kv_idx) != 0


def dense(allowed) -> MaskMod:
    """Any mask given as a tensor `allowed` [B, H, N, N] (bool or integer, nonzero =
    attends; B and H may be 1), read by the kernels in partial blocks. Costs N*N bytes
    per (b, h); `BlockMask.from_dense(allowed)` builds the block mask that goes with it."""
    import torch
    mask = allowed.to(torch.int8).contiguous()
    strides = (mask.stride(0) if mask.shape[0] > 1 else 0, mask.stride(1) if mask.shape[1] > 1 else 0,
               mask.stride(2))

    def reference(b, h, q, kv):
        return mask[b % mask.shape[0], h % mask.shape[1], q, kv] != 0
    return MaskMod(_dense, (mask, *strides), reference)


@triton.jit
def _alibi(score, b, h, q_idx, kv_idx, slopes):
    return score + tl.load(slopes + h) * (kv_idx - q_idx)


def alibi(slopes) -> ScoreMod:
    """ALiBi: score + slope[h] * (kv - q), `slopes` a float32 tensor [H]. The bias does
    not depend on the score, so its gradient rule is the identity (slopes get none)."""
    return ScoreMod(_alibi, "identity", (slopes,),
                    lambda s, b, h, q, kv: s + slopes.to(s.dtype)[h] * (kv - q))


def alibi_slopes(n_heads: int, device="cpu"):
    """The geometric slopes of the ALiBi paper: 2^(-8 i / H) for head i = 1..H."""
    import torch
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / n_heads) for i in range(n_heads)],
                        dtype=torch.float32, device=device)


@triton.jit
def _relative_position(score, b, h, q_idx, kv_idx, scale):
    return score + scale * (q_idx - kv_idx)


def relative_position(scale: float) -> ScoreMod:
    """A linear relative-position bias: score + scale * (q - kv) (additive: gradient 1)."""
    return ScoreMod(_relative_position, "identity", (scale,),
                    lambda s, b, h, q, kv: s + scale * (q - kv))


@triton.jit
def _softcap(score, b, h, q_idx, kv_idx, cap):
    return cap * libdevice.tanh(score / cap)


@triton.jit
def _softcap_grad(score, b, h, q_idx, kv_idx, cap):
    t = libdevice.tanh(score / cap)
    return 1.0 - t * t


def softcap(cap: float) -> ScoreMod:
    """tanh soft-capping (Gemma 2, Grok): cap * tanh(score / cap); d/dscore = 1 - tanh^2."""
    return ScoreMod(_softcap, _softcap_grad, (cap,), lambda s, b, h, q, kv: cap * (s / cap).tanh())
