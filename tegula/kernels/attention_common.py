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


# How many tiles of a causal grid one group of heads holds (see `causal_tile`): about
# two rounds of programs on a GPU of 132 SMs, one round at two CTAs per SM.
_GROUP_TILES = tl.constexpr(256)


@triton.jit
def causal_tile(COSTLIEST_LAST: tl.constexpr):
    """This program's (block, batch_head) in a causal kernel's grid (cdiv(N, block),
    Z*H), the grid dealt costliest first within groups of heads.

    A causal block's cost grows with its position (the forward's and dQ's Q blocks see
    more keys the later they sit: COSTLIEST_LAST) or falls with it (dK/dV's key blocks).
    The GPU starts a grid's programs in order, each on the first SM free, so the order
    is a scheduler's: the grid is cut into groups of heads holding about
    `_GROUP_TILES` tiles, and each group walks its heads' costliest blocks first, its
    lightest last, interleaving its heads. The programs that start last are then short
    ones, and the SMs finish together; the heads in flight at once stay a few (a group,
    at most 16 MB of K and V at D128 whatever N): they are read from L2. A model of the
    scheduler (tile cost = its blocks + 1.4, 132 SMs) puts the last SM's finish at
    1.002x the mean load at N4096 (Z*H 128, 32 blocks a head) and 1.001x at N8192, where
    walking one head at a time, costliest first, gave 1.033x and 1.028x (1.073x at two
    CTAs per SM)."""
    num_blocks = tl.num_programs(0)
    heads = tl.num_programs(1)
    tile = tl.program_id(1) * num_blocks + tl.program_id(0)
    group_heads = tl.cdiv(_GROUP_TILES, num_blocks)
    first = (tile // (group_heads * num_blocks)) * group_heads
    in_group = tl.minimum(group_heads, heads - first)
    rank = tile - first * num_blocks
    block = rank // in_group  # 0: the group's costliest
    if COSTLIEST_LAST:
        block = num_blocks - 1 - block
    return block, first + rank % in_group


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
