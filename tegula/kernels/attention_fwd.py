"""Fused attention forward, FlashAttention-2 style (its dense loops rotated as
FlashAttention-3 runs them: see `_fwd_step`), with score/mask mods and block sparsity.

Each program owns BLOCK_M query rows of one (batch, head) and streams K and V in
BLOCK_N-row blocks with an online softmax: a running row maximum m and denominator l,
the accumulator rescaled by exp2(m_old - m_new) when the maximum grows. It writes the
output and the base-2 logsumexp (m + log2 l) per row, which the backward kernels use to
recompute the probabilities without a second pass.

Which KV blocks a program visits:
- dense, not causal: all; only the tail block past the last whole one is masked;
- dense, causal: the blocks left of the diagonal unmasked, the diagonal ones masked, the
  rest skipped (BLOCK_M must be a multiple of BLOCK_N);
- SPARSE (a BlockMask): its Q block's visited blocks, walked as spans of consecutive
  blocks (flex.py), each one loop whose addresses depend only on its counter (so it is
  pipelined): the span's full blocks unmasked, its partial ones with the mask_mod (and
  causal, if set); BLOCK_M and BLOCK_N divide the mask's blocks. Where no Q block has
  more than one span (ONE_SPAN: sliding windows, prefix masks), the span is walked as
  the dense loops are: the full blocks (rotated, warp-specialized where the config
  asks), then the masked ones before them, then those after; or, with ONE_LOOP (the
  warp-specialized configs'), causal and ONE_SPAN kernels walk all their blocks on one
  loop, masking where a run-time flag says.
"""
import tegula as triton
import tegula.language as tl
from tegula.kernels.attention_common import allowed_of, causal_tile, scores_base2, sparse_span_bounds, sparse_span_count


@triton.jit
def _v_block(v_base, stride_n, stride_d, start_n, offs_d, N_CTX, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
             DESC: tl.constexpr, kv_row0, IN_RANGE: tl.constexpr):
    """The V block of keys start_n .. start_n + BLOCK_N (zero past N_CTX)."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    if DESC:
        v = v_base.load([kv_row0 + start_n, 0])
    else:
        v_ptrs = v_base + offs_n[:, None] * stride_n + offs_d[None, :] * stride_d
        if MASKED and not IN_RANGE:
            v = tl.load(v_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
        else:
            v = tl.load(v_ptrs)
    return v


@triton.jit
def _fwd_step(acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n, stride_d, start_n, offs_m, offs_d,
              sm_scale: tl.constexpr, off_b, off_h, N_CTX,
              SCORE_MOD: tl.constexpr, score_args, MASK_MOD: tl.constexpr, mask_args,
              CAUSAL: tl.constexpr, MASKED: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr,
              DESC: tl.constexpr, kv_row0, IN_RANGE: tl.constexpr, mask_now, ROTATED: tl.constexpr):
    """One KV block. ROTATED, as FlashAttention-3 runs it: the scores S = Q·K^T of this
    block (start_n), then O += P·V of the *previous* block (prev_n, its probabilities p),
    then the softmax of S. The two dots are issued back to back and the softmax reads
    only the first, so on wgmma it runs while the second does (the compiler waits for
    each dot where its result is first read). The accumulator is kept one block behind:
    on return it is the true O up to block prev_n, rescaled to this block's row maxima,
    and (p, start_n) are what the next step (or the caller, after the last) adds.
    Not ROTATED (FlashAttention-2's order): S, its softmax, then O += P·V of this block;
    p and prev_n are passed through. A loop of few blocks (a block-sparse span) runs
    faster so: the rotation costs a P = 0 product at its start and the last block's
    product outside the pipelined loop.

    With DESC, k_base / v_base are descriptors over the [Z*H*N, D] rows (this head's
    first row kv_row0; N is a multiple of BLOCK_N, so a block never reaches into the next
    head), read by TMA; else pointers to this head's rows. A MASKED step applies the
    masks where `mask_now`: a run-time flag in a block-sparse span (whose full blocks
    skip the mask), the constant True elsewhere."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    if DESC:
        kt = k_base.load([kv_row0 + start_n, 0]).T
    else:
        kt_ptrs = k_base + offs_n[None, :] * stride_n + offs_d[:, None] * stride_d  # K^T block: HEAD_DIM x BLOCK_N
        if MASKED and not IN_RANGE:
            kt = tl.load(kt_ptrs, mask=offs_n[None, :] < N_CTX, other=0.0)
        else:
            kt = tl.load(kt_ptrs)
    qk = tl.dot(q, kt, input_precision=PRECISION)
    if ROTATED:
        v = _v_block(v_base, stride_n, stride_d, prev_n, offs_d, N_CTX, BLOCK_N, MASKED, DESC, kv_row0, IN_RANGE)
        acc = tl.dot(p, v, acc, input_precision=PRECISION)
    if SCORE_MOD is None and sm_scale > 0:
        # Base-2 scores are qk * c: the scale is folded into the exponent, as Triton's
        # tutorial does (the row maximum of qk times c is that of qk * c, c > 0), so an
        # element costs one FFMA, not a product for its maximum and an FFMA for its
        # exponent (a separate product an element was a seventh of the D64 loop's
        # floating-point instructions).
        s = qk
        c: tl.constexpr = sm_scale * 1.4426950408889634  # log2(e)
    else:
        s = scores_base2(qk, sm_scale, off_b, off_h, offs_m[:, None], offs_n[None, :], N_CTX, SCORE_MOD, score_args)
        c: tl.constexpr = 1.0
    if MASKED:
        if mask_now:
            allowed = allowed_of(off_b, off_h, offs_m[:, None], offs_n[None, :], N_CTX, CAUSAL, MASK_MOD, mask_args,
                                 IN_RANGE)
            s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * c)
    # A row with nothing allowed so far has m_new = -inf; shifting by 0 instead keeps
    # exp2(-inf - shift) a clean 0 rather than NaN (masks may leave a row empty).
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    p_new = tl.exp2(s * c - shift[:, None])
    alpha = tl.exp2(m_i - shift)
    l_i = l_i * alpha + tl.sum(p_new, 1)
    if ROTATED:
        acc = acc * alpha[:, None]
        p = p_new.to(p.dtype)
        prev_n = start_n
    else:
        v = _v_block(v_base, stride_n, stride_d, start_n, offs_d, N_CTX, BLOCK_N, MASKED, DESC, kv_row0, IN_RANGE)
        acc = tl.dot(p_new.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
    return acc, l_i, m_new, p, prev_n


@triton.jit
def _fwd_blocks(acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n, stride_d, offs_m, offs_d, lo, full_lo, full_hi,
                hi, sm_scale: tl.constexpr, off_b, off_h, N_CTX, SCORE_MOD: tl.constexpr, score_args,
                MASK_MOD: tl.constexpr, mask_args, CAUSAL: tl.constexpr, SPARSE: tl.constexpr, BLOCK_N: tl.constexpr,
                PRECISION: tl.constexpr, DESC: tl.constexpr, kv_row0, IN_RANGE: tl.constexpr,
                WARP_SPECIALIZE: tl.constexpr, ONE_LOOP: tl.constexpr):
    """The rotated steps (`_fwd_step`) over the keys [lo, hi), the blocks of [full_lo,
    full_hi) unmasked (every bound a multiple of BLOCK_N past lo). Returns the state
    after the last block's step and that block's start (prev_n), computed from the
    bounds: a loop's own prev_n is run ahead by the pipeliner.

    ONE_LOOP: all on one loop, the blocks outside [full_lo, full_hi) masked where a
    run-time flag says: a single pipeline, its copies running ahead across the masked
    blocks, instead of one loop per run of blocks, each starting on an exposed copy
    latency. Else one loop per run: the full blocks first (warp-specialized where
    asked), then the masked ones before them (SPARSE only: a dense span starts full),
    then those after. The full blocks come first because a warp-specialized loop's rings
    are live from the kernel's start (its producer fills them at once): a loop before it
    would need rings of its own beside them (300 KB at 128x128 D128: no pipelining), one
    after it takes their bytes."""
    if ONE_LOOP:
        for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
            acc, l_i, m_i, p, prev_n = _fwd_step(acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n, stride_d,
                                                 start_n, offs_m, offs_d, sm_scale, off_b, off_h, N_CTX, SCORE_MOD,
                                                 score_args, MASK_MOD, mask_args, CAUSAL, True, BLOCK_N, PRECISION,
                                                 DESC, kv_row0, IN_RANGE, (start_n < full_lo) | (start_n >= full_hi),
                                                 True)
        prev_n = tl.where(hi > lo, lo + (hi - 1 - lo) // BLOCK_N * BLOCK_N, 0)
    else:
        for start_n in tl.range(full_lo, full_hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
            acc, l_i, m_i, p, prev_n = _fwd_step(acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n, stride_d,
                                                 start_n, offs_m, offs_d, sm_scale, off_b, off_h, N_CTX, SCORE_MOD,
                                                 score_args, MASK_MOD, mask_args, CAUSAL, False, BLOCK_N, PRECISION,
                                                 DESC, kv_row0, IN_RANGE, True, True)
        # (with no full block, p is still 0 and block 0 is as good as any)
        if SPARSE:
            after_full = tl.where(full_hi > full_lo, full_hi - BLOCK_N, 0)
            prev_n = after_full
            for start_n in tl.range(lo, full_lo, BLOCK_N):
                acc, l_i, m_i, p, prev_n = _fwd_step(acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n, stride_d,
                                                     start_n, offs_m, offs_d, sm_scale, off_b, off_h, N_CTX, SCORE_MOD,
                                                     score_args, MASK_MOD, mask_args, CAUSAL, True, BLOCK_N, PRECISION,
                                                     DESC, kv_row0, IN_RANGE, True, True)
            prev_n = tl.where(full_lo > lo, full_lo - BLOCK_N, after_full)
        else:
            prev_n = tl.maximum(full_hi - BLOCK_N, 0)
        if CAUSAL or SPARSE or not IN_RANGE:
            # (a dense kernel in range has no block after the full ones: no loop, whose
            # rings a persistent kernel would have to hold beside the first loop's)
            before_tail = prev_n
            for start_n in tl.range(full_hi, hi, BLOCK_N):
                acc, l_i, m_i, p, prev_n = _fwd_step(acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n, stride_d,
                                                     start_n, offs_m, offs_d, sm_scale, off_b, off_h, N_CTX,
                                                     SCORE_MOD, score_args, MASK_MOD, mask_args, CAUSAL, True, BLOCK_N,
                                                     PRECISION, DESC, kv_row0, IN_RANGE, True, True)
            prev_n = tl.where(hi > full_hi, full_hi + (hi - 1 - full_hi) // BLOCK_N * BLOCK_N, before_tail)
    return acc, l_i, m_i, p, prev_n


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr,
                         stride_z, stride_h, stride_n, stride_d, H, N_CTX,
                         sparse, SCORE_MOD: tl.constexpr, score_args, MASK_MOD: tl.constexpr, mask_args,
                         HEAD_DIM: tl.constexpr, SM_SCALE: tl.constexpr, CAUSAL: tl.constexpr,
                         SPARSE: tl.constexpr,
                         SPARSE_Q: tl.constexpr, SPARSE_KV: tl.constexpr, PRECISION: tl.constexpr,
                         ON_GPU: tl.constexpr, IN_RANGE: tl.constexpr, DESC: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr = False,
                         ONE_SPAN: tl.constexpr = False, ONE_LOOP: tl.constexpr = False,
                         PERSISTENT: tl.constexpr = False, ZH=0):
    """`sparse` is () when not SPARSE, else a BlockMask's spans per Q block
    (`BlockMask.kernel_args`, read by attention_common's `sparse_span_*`): ranges of
    consecutive KV blocks with their full blocks in one run inside. Walking one is a
    loop whose addresses depend only on its counter, which the compiler pipelines.

    DESC: q_ptr, k_ptr, v_ptr and out_ptr are tensor descriptors over the contiguous
    inputs viewed as [Z*H*N, D] rows (blocks [BLOCK_M, D] for q and out, [BLOCK_N, D]
    for k and v), N a multiple of both blocks; on Hopper their loads and the output
    store are TMA copies. The Q and KV rows of a (z, h) start at row0.

    ONE_SPAN (SPARSE only): no Q block walks more than one span (a sliding window, a
    prefix or causal mask): the span is then walked as the dense loops walk theirs.

    WARP_SPECIALIZE (a config's: attention_configs has warp-specialized twins): the
    unmasked loop asks for a producer warpgroup issuing the TMA copies (`tl.range(...,
    warp_specialize=True)`, honoured on Hopper's descriptor path), so the two consumer
    warpgroups never wait for each other's slot releases.

    ONE_LOOP (a config's; causal or SPARSE with ONE_SPAN): every visited block on one
    loop, the masked ones told apart at run time, rather than the full blocks' loop
    between loops of masked ones.

    PERSISTENT (a config's): the grid is (P, 1), P programs (the SM count) walking the
    ZH * cdiv(N_CTX, BLOCK_M) tiles (ZH = Z * H, the (batch, head) pairs) round robin:
    one loop over tiles around each tile's KV loops. On the warp-specialized
    descriptor path the compiler allocates the KV rings once and keeps their slots
    turning across tiles, so the producer fills the next tile's first K and V blocks
    while the consumers finish this one (no program start, no pipeline fill per tile)."""
    if PERSISTENT:
        num_m = tl.cdiv(N_CTX, BLOCK_M)
        # (the tile loop keeps its invariants: hoisted, the descriptors' address tiles
        # would stay live, in registers, across every tile's KV loop)
        for tile in tl.range(tl.program_id(0), num_m * ZH, tl.num_programs(0), disable_licm=True):
            block_m = _block_m_of(tile, num_m, tl.num_programs(0), CAUSAL and not SPARSE)
            _fwd_tile(tile // num_m, block_m, q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, stride_z, stride_h, stride_n,
                      stride_d, H, N_CTX, sparse, SCORE_MOD, score_args, MASK_MOD, mask_args, HEAD_DIM, SM_SCALE,
                      CAUSAL, SPARSE, SPARSE_Q, SPARSE_KV, PRECISION, IN_RANGE, DESC, BLOCK_M, BLOCK_N,
                      WARP_SPECIALIZE, ONE_SPAN, ONE_LOOP)
    else:
        block_m = tl.program_id(0)
        batch_head = tl.program_id(1)
        if CAUSAL and not SPARSE:
            # Causal Q blocks cost more the later they sit (they see more keys): the
            # costliest start first, a few heads at a time
            block_m, batch_head = causal_tile(True)
        _fwd_tile(batch_head, block_m, q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, stride_z, stride_h, stride_n,
                  stride_d, H, N_CTX, sparse, SCORE_MOD, score_args, MASK_MOD, mask_args, HEAD_DIM, SM_SCALE, CAUSAL,
                  SPARSE, SPARSE_Q, SPARSE_KV, PRECISION, IN_RANGE, DESC, BLOCK_M, BLOCK_N, WARP_SPECIALIZE, ONE_SPAN,
                  ONE_LOOP)


@triton.jit
def _block_m_of(tile, num_m, programs, BALANCE: tl.constexpr):
    """The Q block of a persistent kernel's tile (Q blocks fastest, so the tiles running
    at once share a few heads' K and V in L2). BALANCE (causal, where a Q block costs
    more the later it sits): a program's tiles lie `programs` apart, so from one tile to
    its next its position in a head moves by s = programs mod num_m (or back by num_m -
    s): the positions are cut in runs of s, the even runs given the light blocks in
    order and the odd runs the heavy ones from the last, so that every program
    alternates light and heavy tiles. The programs then keep pace with each other and
    work on the few heads a round of tiles covers. (Session 19's order, every other
    head walked last block first, kept the imbalance within 3% at 132 programs but let a
    program meet light or heavy blocks for 8-16 tiles in a row: the programs drifted
    apart to 23 heads at once — 90 MB of K and V at N8192 D128 — and the persistent
    forward ran 3-9% behind the non-persistent one there, on an H200.) Where s is 0 a
    program stays at one position: every other head is walked last block first."""
    block_m = tile % num_m
    if BALANCE:
        s = programs % num_m
        s = tl.minimum(s, num_m - s)
        if s == 0:
            if (tile // num_m) % 2 == 0:
                block_m = num_m - 1 - block_m
        else:
            run = block_m // s
            light = (run // 2) * s + block_m % s
            block_m = tl.where(run % 2 == 0, light, num_m - 1 - light)
    return block_m


@triton.jit
def _fwd_tile(batch_head, block_m, q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, stride_z, stride_h, stride_n, stride_d, H,
              N_CTX, sparse, SCORE_MOD: tl.constexpr, score_args, MASK_MOD: tl.constexpr, mask_args,
              HEAD_DIM: tl.constexpr, SM_SCALE: tl.constexpr, CAUSAL: tl.constexpr, SPARSE: tl.constexpr,
              SPARSE_Q: tl.constexpr, SPARSE_KV: tl.constexpr, PRECISION: tl.constexpr, IN_RANGE: tl.constexpr,
              DESC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
              ONE_SPAN: tl.constexpr, ONE_LOOP: tl.constexpr):
    """The output rows block_m * BLOCK_M ... of one (batch, head): its Q block against
    the KV blocks it visits, then the output and logsumexp stores."""
    off_b = batch_head // H
    off_h = batch_head % H
    # 64-bit offsets: Z*H*N*D elements can exceed 2**31 for long contexts.
    base = off_b.to(tl.int64) * stride_z + off_h.to(tl.int64) * stride_h
    start_m = block_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    in_q = offs_m < N_CTX
    row0 = batch_head * N_CTX
    if DESC:
        q = q_ptr.load([row0 + start_m, 0])
        k_base = k_ptr
        v_base = v_ptr
    else:
        q = tl.load(q_ptr + base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d, mask=in_q[:, None],
                    other=0.0)
        k_base = k_ptr + base
        v_base = v_ptr + base

    acc_ty = lse_ptr.dtype.element_ty  # fp32, or fp64 for fp64 inputs
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=acc_ty)
    l_i = tl.zeros((BLOCK_M,), dtype=acc_ty)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=acc_ty)
    # The dense loops are rotated (see _fwd_step): each step adds the previous block's
    # P·V, the first P = 0 times block 0 (which every row visits), and the last visited
    # block's after the loops. A block-sparse span is a short loop: not rotated.
    p = tl.zeros((BLOCK_M, BLOCK_N), dtype=q.dtype)
    prev_n = 0
    if SPARSE and not ONE_SPAN:
        # one pipelined loop per span: its full blocks unmasked, the blocks around them masked
        q_blk = start_m // SPARSE_Q
        for r in range(sparse_span_count(sparse, off_b, off_h, q_blk)):
            lo, full_lo, full_hi, hi = sparse_span_bounds(sparse, off_b, off_h, q_blk, r, SPARSE_KV)
            for start_n in range(lo, hi, BLOCK_N):
                acc, l_i, m_i, p, prev_n = _fwd_step(acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n,
                                                     stride_d, start_n, offs_m, offs_d, SM_SCALE, off_b, off_h,
                                                     N_CTX, SCORE_MOD, score_args, MASK_MOD, mask_args, CAUSAL,
                                                     True, BLOCK_N, PRECISION, DESC, row0, IN_RANGE,
                                                     (start_n < full_lo) | (start_n >= full_hi), False)
    else:
        # Keys [lo, hi) are visited, those in [full_lo, full_hi) by every row (no mask);
        # each bound a multiple of BLOCK_N past lo, so the three loops step on one grid.
        if SPARSE:
            q_blk = start_m // SPARSE_Q
            lo, full_lo, full_hi, hi = sparse_span_bounds(sparse, off_b, off_h, q_blk, 0, SPARSE_KV)
            # a Q block that visits nothing has no span (its entry 0 is not one)
            walks = sparse_span_count(sparse, off_b, off_h, q_blk) > 0
            lo = tl.where(walks, lo, 0)
            full_lo = tl.where(walks, full_lo, 0)
            full_hi = tl.where(walks, full_hi, 0)
            hi = tl.where(walks, hi, 0)
        elif CAUSAL:
            # Keys left of this Q block are visible to all of its rows: no mask there.
            lo = 0
            full_lo = 0
            full_hi = start_m
            hi = tl.minimum(start_m + BLOCK_M, N_CTX)
        else:
            lo = 0
            full_lo = 0
            full_hi = N_CTX if IN_RANGE else N_CTX - N_CTX % BLOCK_N
            hi = N_CTX
        # (a dense kernel's only masked block is a partial last one: its own loop)
        acc, l_i, m_i, p, prev_n = _fwd_blocks(
            acc, l_i, m_i, p, prev_n, q, k_base, v_base, stride_n, stride_d, offs_m, offs_d, lo, full_lo, full_hi,
            hi, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD, score_args, MASK_MOD, mask_args, CAUSAL, SPARSE, BLOCK_N,
            PRECISION, DESC, row0, IN_RANGE, WARP_SPECIALIZE, ONE_LOOP and (CAUSAL or SPARSE))
        v = _v_block(v_base, stride_n, stride_d, prev_n, offs_d, N_CTX, BLOCK_N, True, DESC, row0, IN_RANGE)
        acc = tl.dot(p, v, acc, input_precision=PRECISION)
    # Rows where nothing attends get output 0 and logsumexp +inf, which makes every
    # probability the backward recomputes for them exp2(s - inf) = 0.
    # (One reciprocal per row, then products: 64 divisions a thread at D128 were a
    # tenth of the tile's end. An empty row's accumulator is 0 already.)
    empty = l_i == 0.0
    out = acc * tl.where(empty, 0.0, 1.0 / l_i)[:, None]
    lse = tl.where(empty, float("inf"), m_i + tl.log2(l_i))
    if DESC:
        out_ptr.store([row0 + start_m, 0], out.to(out_ptr.dtype))
    else:
        tl.store(out_ptr + base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d,
                 out.to(out_ptr.dtype.element_ty), mask=in_q[:, None])
    tl.store(lse_ptr + batch_head.to(tl.int64) * N_CTX + offs_m, lse, mask=in_q)
