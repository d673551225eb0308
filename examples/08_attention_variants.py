"""Attention variants with `tegula.kernels.attention`: forward and backward, checked.

The library's fused attention (FlashAttention-2 forward and backward) takes
FlexAttention-style modifications written as ordinary `@triton.jit` functions:
a *score_mod* `(score, b, h, q_idx, kv_idx, *args) -> score` and a *mask_mod*
`(b, h, q_idx, kv_idx, *args) -> bool`, where `args` are extra kernel arguments such as a
tensor of per-token document ids. A BlockMask, built once from a mask_mod, lists for each
block of queries the key blocks to visit, so masked-out blocks cost nothing. This script
runs each variant forward and backward and compares out, dq, dk and dv with a dense
PyTorch computation in float64; it also defines one mod of its own (a sigmoid-gated
score with its derivative) to show what a user writes.

    python examples/08_attention_variants.py [--batch Z --heads H --ctx N --dim D] [--small]
"""
import argparse
import math
import sys
import time

try:
    import torch
except ModuleNotFoundError:  # the examples are standalone scripts: say what is missing
    raise SystemExit("this example compares against PyTorch: pip install -e '.[test]' "
                     "(or pip install torch)") from None

import tegula as triton
import tegula.language as tl
from tegula.kernels import ScoreMod, attention, create_block_mask, mods

ON_GPU = torch.cuda.is_available()


# A user-written score_mod: a temperature per head read from a tensor (an extra
# argument), with the derivative backward needs: d(score * t[h]) / d score = t[h].
@triton.jit
def head_temperature(score, b, h, q_idx, kv_idx, temperatures):
    return score * tl.load(temperatures + h)


@triton.jit
def head_temperature_grad(score, b, h, q_idx, kv_idx, temperatures):
    return tl.load(temperatures + h) + 0.0 * score  # a full tile, the score's shape


def variants(Z, H, N, device):
    """name -> (attention() keyword arguments); every tensor the mods read is fresh."""
    docs = torch.sort(torch.randint(0, 5, (N,), device=device)).values.to(torch.int32)  # 5 packed documents
    temperatures = torch.rand(H, device=device) + 0.5
    window = max(N // 8, 16)
    return {
        "dense": {},
        "causal": dict(causal=True),
        f"sliding window {window}": dict(block_mask=create_block_mask(mods.sliding_window(window), 1, 1, N, device)),
        "document (jagged), causal": dict(mask_mod=mods.document(docs), causal=True),
        "ALiBi, causal": dict(score_mod=mods.alibi(mods.alibi_slopes(H, device)), causal=True),
        "tanh softcap 20": dict(score_mod=mods.softcap(20.0)),
        "head temperature (user mod)": dict(score_mod=ScoreMod(
            head_temperature, head_temperature_grad, (temperatures,),
            lambda s, b, h, q, kv: s * temperatures.to(s.dtype)[h])),
    }


def dense_reference(q, k, v, causal=False, score_mod=None, mask_mod=None, block_mask=None):
    """softmax with the mods' torch twins, on the full N x N score matrix."""
    Z, H, N, D = q.shape
    b, h = torch.arange(Z, device=q.device).view(Z, 1, 1, 1), torch.arange(H, device=q.device).view(1, H, 1, 1)
    qi, ki = torch.arange(N, device=q.device).view(N, 1), torch.arange(N, device=q.device).view(1, N)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    if score_mod is not None:
        s = score_mod.reference(s, b, h, qi, ki)
    if block_mask is not None:
        mask_mod, causal = block_mask.mask_mod, causal or block_mask.causal
    allowed = torch.ones(N, N, dtype=torch.bool, device=q.device)
    if causal:
        allowed &= qi >= ki
    if mask_mod is not None:
        allowed = allowed & mask_mod.reference(b, h, qi, ki)
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ v


def main(batch=None, heads=None, ctx=None, dim=None, small=False):
    """Every variant forward and backward; True when all match the dense reference."""
    device = "cuda" if ON_GPU else "cpu"
    big = ON_GPU and not small
    Z, H = batch or (2 if big else 1), heads or (8 if big else 2)
    N, D = ctx or (1500 if big else 90), dim or (64 if big else 16)  # N not a multiple of a block
    dtype = torch.float16 if big else torch.float32
    tol = 2e-2 if dtype == torch.float16 else 1e-3
    ok = True
    for name, kwargs in variants(Z, H, N, device).items():
        q, k, v = (torch.randn(Z, H, N, D, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
        start = time.perf_counter()
        out = attention(q, k, v, **kwargs)
        d_out = torch.randn_like(out)
        out.backward(d_out)
        seconds = time.perf_counter() - start
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        expected = dense_reference(q64, k64, v64, **kwargs)
        expected.backward(d_out.double())
        pairs = ((out, expected), (q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad))
        errors = [(got.double() - want).abs().max().item() for got, want in pairs]
        good = all(torch.allclose(got.double(), want, atol=tol, rtol=tol) for got, want in pairs)
        ok &= good
        visited = kwargs["block_mask"].visited_fraction() if "block_mask" in kwargs else None
        note = f", visits {visited:.0%} of the blocks" if visited is not None else ""
        print(f"{name:30s} Z={Z} H={H} N={N} D={D} {str(dtype)[6:]} on {device}: max abs error out/dq/dk/dv "
              + " ".join(f"{e:.2g}" for e in errors) + f" -> {'OK' if good else 'MISMATCH'} "
              f"(fwd+bwd {seconds * 1e3:.0f} ms{note})")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--heads", type=int, default=None)
    parser.add_argument("--ctx", type=int, default=None)
    parser.add_argument("--dim", type=int, default=None)
    parser.add_argument("--small", action="store_true", help="a small, fast run (CPU interpreter)")
    args = parser.parse_args()
    sys.exit(0 if main(args.batch, args.heads, args.ctx, args.dim, small=args.small) else 1)
