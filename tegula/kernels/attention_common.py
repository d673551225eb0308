"""The per-block pieces every attention kernel shares: scores, masks, score gradients.

A score block is computed from `qk = Q_blk @ K_blk^T` (or its transpose in the dK/dV
kernel). The mods see the score scaled by `sm_scale` in natural units, as in PyTorch's
FlexAttention (`sm_scale` is a constexpr, as there: exact for fp64 inputs, folded with
log2(e) at compile time); the kernels keep scores in base 2 (times log2(e)) so the softmax
numerator is one `exp2`. Without a score_mod the two scalings fold into one multiply.

The index tiles `q_idx` and `kv_idx` are broadcastable 2-D tiles ([M, 1] and [1, N], or
transposed in the dK/dV kernel): mods must be elementwise, with broadcasting. Indices are
wrapped into [0, N_CTX) before a mod sees them, so a mod that loads from a per-token
tensor (document ids) never reads past its end on the padded rows and columns of the
last block; those positions are masked by the kernels themselves.
"""
import tegula as triton
import tegula.language as tl


@triton.jit
def scores_base2(qk, sm_scale: tl.constexpr, off_b, off_h, q_idx, kv_idx, N_CTX,
                 SCORE_MOD: tl.constexpr, score_args):
    """Base-2 scores of one block: log2(e) * score_mod(sm_scale * qk, ...)."""
    if SCORE_MOD is None:
        s = qk * (sm_scale * 1.4426950408889634)  # log2(e); one constexpr product
    else:
        raw = qk * sm_scale
        s = SCORE_MOD(raw, off_b, off_h, q_idx % N_CTX, kv_idx % N_CTX, *score_args) * 1.4426950408889634
    return s


@triton.jit
def score_mod_grad(ds, qk, sm_scale: tl.constexpr, off_b, off_h, q_idx, kv_idx, N_CTX,
                   SCORE_GRAD: tl.constexpr, score_args):
    """Chain rule through an elementwise score_mod: ds * d(mod)/d(score) at the raw score.

    SCORE_GRAD is None for no score_mod and for additive mods (a bias independent of the
    score), whose derivative is 1."""
    if SCORE_GRAD is not None:
        ds = ds * SCORE_GRAD(qk * sm_scale, off_b, off_h, q_idx % N_CTX, kv_idx % N_CTX, *score_args)
    return ds


@triton.jit
def allowed_of(off_b, off_h, q_idx, kv_idx, N_CTX, CAUSAL: tl.constexpr,
               MASK_MOD: tl.constexpr, mask_args):
    """Which (q, kv) pairs of a block take part: in range, causal, and mask_mod."""
    allowed = (q_idx < N_CTX) & (kv_idx < N_CTX)
    if CAUSAL:
        allowed = allowed & (q_idx >= kv_idx)
    if MASK_MOD is not None:
        allowed = allowed & MASK_MOD(off_b, off_h, q_idx % N_CTX, kv_idx % N_CTX, *mask_args)
    return allowed



# A BlockMask's runs as the kernels get them (flex.BlockMask.kernel_args): `sparse` =
# (partial count, first, end, full count, first, end, count strides z, h, run strides
# z, h, row). Only these two helpers read that layout.

@triton.jit
def sparse_run_count(sparse, off_b, off_h, blk, FULL: tl.constexpr):
    """How many runs of full (FULL) or partial blocks block `blk` of this (b, h) walks."""
    if FULL:
        counts = sparse[3]
    else:
        counts = sparse[0]
    return tl.load(counts + off_b * sparse[6] + off_h * sparse[7] + blk)


@triton.jit
def sparse_run_bounds(sparse, off_b, off_h, blk, r, FULL: tl.constexpr, SCALE: tl.constexpr):
    """Run `r`'s first and end positions (its mask blocks times SCALE, the mask block
    size along the walked dimension)."""
    if FULL:
        first = sparse[4]
        end = sparse[5]
    else:
        first = sparse[1]
        end = sparse[2]
    at = off_b * sparse[8] + off_h * sparse[9] + blk * sparse[10] + r
    return tl.load(first + at) * SCALE, tl.load(end + at) * SCALE
