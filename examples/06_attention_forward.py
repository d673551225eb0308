"""Attention forward pass, FlashAttention-2 style: softmax(Q K^T * scale) V in one kernel.

Each program owns BLOCK_M query rows of one (batch, head) and streams the keys and
values in BLOCK_N-row blocks, never materializing the N x N score matrix. The softmax
is computed online: a running row maximum m and running denominator l are kept, and
whenever a new block raises the maximum, what was accumulated so far is rescaled by
exp(m_old - m_new). Scores are kept in base 2 (scale * log2(e), then exp2), which is
one multiply cheaper per element than exp. With CAUSAL, a query attends only to keys
at or before its position, and key blocks wholly after the query block are skipped.

    python examples/06_attention_forward.py [--batch Z --heads H --ctx N --dim D] [--small]
"""
import argparse
import math
import sys

try:
    import torch
except ModuleNotFoundError:  # the examples are standalone scripts: say what is missing
    raise SystemExit("this example compares against PyTorch: pip install -e '.[test]' "
                     "(or pip install torch)") from None

import tegula as triton
import tegula.language as tl

ON_GPU = torch.cuda.is_available()


def attention_configs():
    if not ON_GPU:
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4, num_stages=2)]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w)
            for bm in (64, 128) for bn in (32, 64) for s in (2, 3) for w in (4, 8)]


@triton.autotune(configs=attention_configs(), key=["N_CTX", "HEAD_DIM", "CAUSAL"])
@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, out_ptr, sm_scale,
                         stride_z, stride_h, stride_n, stride_d, H, N_CTX,
                         HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    block_m = tl.program_id(0)
    batch_head = tl.program_id(1)
    # 64-bit offsets: Z*H*N*D elements can exceed 2**31 for long contexts.
    base = (batch_head // H).to(tl.int64) * stride_z + (batch_head % H).to(tl.int64) * stride_h
    offs_m = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_rows = offs_m[:, None] < N_CTX
    q_ptrs = q_ptr + base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d
    q = tl.load(q_ptrs, mask=q_rows, other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    if CAUSAL:
        end_n = tl.minimum((block_m + 1) * BLOCK_M, N_CTX)
    else:
        end_n = N_CTX
    for start_n in range(0, end_n, BLOCK_N):
        keys = start_n + offs_n
        kt = tl.load(k_ptr + base + keys[None, :] * stride_n + offs_d[:, None] * stride_d,
                     mask=keys[None, :] < N_CTX, other=0.0)  # K^T block: HEAD_DIM x BLOCK_N
        scores = tl.dot(q, kt) * qk_scale
        allowed = keys[None, :] < N_CTX
        if CAUSAL:
            allowed = allowed & (offs_m[:, None] >= keys[None, :])
        scores = tl.where(allowed, scores, float("-inf"))
        # Key 0 is allowed for every row, so after the first block m_new is finite and
        # exp2(-inf - m_new) is a clean 0, never NaN.
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        p = tl.exp2(scores - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + base + keys[:, None] * stride_n + offs_d[None, :] * stride_d,
                    mask=keys[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d,
             out.to(out_ptr.dtype.element_ty), mask=q_rows)


def attention(q, k, v, causal, sm_scale=None):
    """Attention over (Z, H, N_CTX, HEAD_DIM) fp16 tensors sharing one contiguous layout."""
    Z, H, N_CTX, HEAD_DIM = q.shape
    assert k.shape == v.shape == q.shape and q.stride() == k.stride() == v.stride()
    sm_scale = 1.0 / math.sqrt(HEAD_DIM) if sm_scale is None else sm_scale
    out = torch.empty_like(q)
    grid = lambda meta: (triton.cdiv(N_CTX, meta["BLOCK_M"]), Z * H)
    attention_fwd_kernel[grid](q, k, v, out, sm_scale, q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                               H, N_CTX, HEAD_DIM=HEAD_DIM, CAUSAL=causal)
    return out


def reference(q, k, v, causal):
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=q.device), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.double()


def main(batch=None, heads=None, ctx=None, dim=None, small=False):
    """Causal and non-causal attention on random fp16 inputs; True when both match."""
    device = "cuda" if ON_GPU else "cpu"
    big = ON_GPU and not small
    Z, H = batch or (4 if big else 1), heads or (16 if big else 2)
    N, D = ctx or (2000 if big else 77), dim or (64 if big else 16)  # N not a multiple of a block
    shape = (Z, H, N, D)
    q, k, v = (torch.randn(shape, device=device, dtype=torch.float16) for _ in range(3))
    ok = True
    for causal in (False, True):
        out = attention(q, k, v, causal)
        expected = reference(q, k, v, causal)
        err = (out.double() - expected).abs().max().item()
        try:
            triton.testing.assert_close(out.double(), expected, atol=1e-2, rtol=1e-2)
            good = True
        except AssertionError:
            good = False
        ok &= good
        print(f"attention Z={Z} H={H} N_CTX={N} HEAD_DIM={D} fp16 causal={causal} on {device}: "
              f"max abs error {err:.3g} -> {'OK' if good else 'MISMATCH'}")
        ms = triton.testing.do_bench(lambda: attention(q, k, v, causal))
        flops = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        print(f"time: {ms:.4f} ms per call, {flops / ms / 1e9:.3g} TFLOP/s")
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
