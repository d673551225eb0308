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
               MASK_MOD: tl.constexpr, mask_args, IN_RANGE: tl.constexpr):
    """Which (q, kv) pairs of a block take part: in range, causal, and mask_mod.

    IN_RANGE: the caller knows every index is below N_CTX (N_CTX a multiple of the
    blocks), so neither the range test nor the wrapping is needed: a masked block then
    costs only its causal and mask_mod tests."""
    if IN_RANGE:
        allowed = q_idx >= 0  # all true, in the broadcast shape
        if CAUSAL:
            allowed = q_idx >= kv_idx
        if MASK_MOD is not None:
            allowed = allowed & MASK_MOD(off_b, off_h, q_idx, kv_idx, *mask_args)
    else:
        allowed = (q_idx < N_CTX) & (kv_idx < N_CTX)
        if CAUSAL:
            allowed = allowed & (q_idx >= kv_idx)
        if MASK_MOD is not None:
            allowed = allowed & MASK_MOD(off_b, off_h, q_idx % N_CTX, kv_idx % N_CTX, *mask_args)
    return allowed


# A BlockMask's spans as the kernels get them (flex.BlockMask.kernel_args): `sparse` =
# (span count, first, full first, full end, end, count strides z, h, span strides z, h,
# row). Only these two helpers read that layout. A span is one loop over consecutive
# blocks: its full blocks [full first, full end) unmasked, the others masked.

@triton.jit
def sparse_span_count(sparse, off_b, off_h, blk):
    """How many spans block `blk` of this (b, h) walks."""
    return tl.load(sparse[0] + off_b * sparse[5] + off_h * sparse[6] + blk)


@triton.jit
def sparse_span_bounds(sparse, off_b, off_h, blk, r, SCALE: tl.constexpr):
    """Span `r`'s first, full first, full end and end positions (its mask blocks times
    SCALE, the mask block size along the walked dimension)."""
    at = off_b * sparse[7] + off_h * sparse[8] + blk * sparse[9] + r
    return (tl.load(sparse[1] + at) * SCALE, tl.load(sparse[2] + at) * SCALE, tl.load(sparse[3] + at) * SCALE,
            tl.load(sparse[4] + at) * SCALE)
