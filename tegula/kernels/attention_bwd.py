"""Fused attention backward, FlashAttention-2 scheme: three kernels, no atomics.

With P = softmax(S), O = P V and dO given: dV = P^T dO, dP = dO V^T,
dS = P * (dP - delta) with delta = rowsum(dO * O), dQ = dS K * scale, dK = dS^T Q * scale
(and dS multiplied by d score_mod / d score first when there is a score_mod). P is
recomputed per block from the forward's base-2 logsumexp: P = exp2(S2 - lse).

- `attention_bwd_preprocess`: delta per query row.
- `attention_bwd_dkdv_kernel`: each program owns BLOCK_N keys (their K and V stay in
  registers) and loops over the query blocks that see them, accumulating dK and dV.
- `attention_bwd_dq_kernel`: each program owns BLOCK_M queries and loops over the key
  blocks they see, accumulating dQ.
Every output row has one owner, so there are no atomics and the result is deterministic.
Block visiting mirrors the forward (attention_fwd.py); the dK/dV kernel walks the
transposed lists of a BlockMask.
"""
import tegula as triton
import tegula.language as tl
from tegula.kernels.attention_common import (
    allowed_of,
    causal_tile,
    score_mod_grad,
    scores_base2,
    sparse_span_bounds,
    sparse_span_count,
)


@triton.jit
def attention_bwd_preprocess(o_ptr, do_ptr, delta_ptr, stride_z, stride_h, stride_n, stride_d, H, N_CTX,
                             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    batch_head = tl.program_id(1)
    base = (batch_head // H).to(tl.int64) * stride_z + (batch_head % H).to(tl.int64) * stride_h
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    in_q = offs_m < N_CTX
    ptrs = base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d
    acc_ty = delta_ptr.dtype.element_ty
    o = tl.load(o_ptr + ptrs, mask=in_q[:, None], other=0.0).to(acc_ty)
    do = tl.load(do_ptr + ptrs, mask=in_q[:, None], other=0.0).to(acc_ty)
    tl.store(delta_ptr + batch_head.to(tl.int64) * N_CTX + offs_m, tl.sum(o * do, 1), mask=in_q)


@triton.jit
def _dkdv_step(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_n, stride_d, start_m, offs_n, offs_d,
               sm_scale: tl.constexpr, off_b, off_h, N_CTX, SCORE_MOD: tl.constexpr, SCORE_GRAD: tl.constexpr,
               score_args, MASK_MOD: tl.constexpr, mask_args, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
               BLOCK_M: tl.constexpr, PRECISION: tl.constexpr, IN_RANGE: tl.constexpr, mask_now):
    """One Q block of a dK/dV program; `mask_now` as in the forward's step."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    qt_ptrs = q_base + offs_m[None, :] * stride_n + offs_d[:, None] * stride_d  # Q^T block: HEAD_DIM x BLOCK_M
    do_ptrs = do_base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d
    if MASKED and not IN_RANGE:
        in_q = offs_m < N_CTX
        qt = tl.load(qt_ptrs, mask=in_q[None, :], other=0.0)
        # lse = +inf on padded rows makes their probabilities 0
        lse = tl.load(lse_base + offs_m, mask=in_q, other=float("inf"))
    else:
        qt = tl.load(qt_ptrs)
        lse = tl.load(lse_base + offs_m)
    # Transposed scores: keys along rows, queries along columns.
    qk_t = tl.dot(k, qt, input_precision=PRECISION)
    q_idx = offs_m[None, :]
    kv_idx = offs_n[:, None]
    p_t = tl.exp2(scores_base2(qk_t, sm_scale, off_b, off_h, q_idx, kv_idx, N_CTX, SCORE_MOD, score_args)
                  - lse[None, :])
    if MASKED:
        if mask_now:
            p_t = tl.where(allowed_of(off_b, off_h, q_idx, kv_idx, N_CTX, CAUSAL, MASK_MOD, mask_args, IN_RANGE), p_t,
                           0.0)
    if MASKED and not IN_RANGE:
        do = tl.load(do_ptrs, mask=in_q[:, None], other=0.0)
        delta = tl.load(delta_base + offs_m, mask=in_q, other=0.0)
    else:
        do = tl.load(do_ptrs)
        delta = tl.load(delta_base + offs_m)
    dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=PRECISION)
    # dO^T and Q are loaded again in the other orientation rather than taken through
    # tl.trans: the compiler software-pipelines (cp.async rings, wgmma) loads whose
    # every use is a dot, and a tile read both directly and through tl.trans is not;
    # the second read of the same rows hits L2.
    do_t_ptrs = do_base + offs_m[None, :] * stride_n + offs_d[:, None] * stride_d
    q_ptrs = q_base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d
    if MASKED and not IN_RANGE:
        do_t = tl.load(do_t_ptrs, mask=in_q[None, :], other=0.0)
        q = tl.load(q_ptrs, mask=in_q[:, None], other=0.0)
    else:
        do_t = tl.load(do_t_ptrs)
        q = tl.load(q_ptrs)
    dp_t = tl.dot(v, do_t, input_precision=PRECISION)
    ds_t = p_t * (dp_t - delta[None, :])
    ds_t = score_mod_grad(ds_t, qk_t, sm_scale, off_b, off_h, q_idx, kv_idx, N_CTX, SCORE_GRAD, score_args)
    dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=PRECISION)
    return dk, dv


@triton.jit
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dk_ptr, dv_ptr, lse_ptr, delta_ptr,
                              stride_z, stride_h, stride_n, stride_d, H, N_CTX,
                              sparse, SCORE_MOD: tl.constexpr, SCORE_GRAD: tl.constexpr, score_args,
                              MASK_MOD: tl.constexpr, mask_args,
                              HEAD_DIM: tl.constexpr, SM_SCALE: tl.constexpr, CAUSAL: tl.constexpr,
                              SPARSE: tl.constexpr,
                              SPARSE_Q: tl.constexpr, SPARSE_KV: tl.constexpr, PRECISION: tl.constexpr,
                              ON_GPU: tl.constexpr, IN_RANGE: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """`sparse`: () or a BlockMask's spans per KV block (of Q blocks), laid out as the
    forward's (attention_fwd.py)."""
    batch_head = tl.program_id(1)
    block_n = tl.program_id(0)
    if CAUSAL and not SPARSE:
        # a key block's cost falls with its position (later queries see it): the grid
        # dealt costliest first a few heads at a time, as the forward's
        block_n, batch_head = causal_tile(False)
    off_b = batch_head // H
    off_h = batch_head % H
    base = off_b.to(tl.int64) * stride_z + off_h.to(tl.int64) * stride_h
    row_base = batch_head.to(tl.int64) * N_CTX
    start_n = block_n * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    in_kv = offs_n < N_CTX
    kv_ptrs = base + offs_n[:, None] * stride_n + offs_d[None, :] * stride_d
    k = tl.load(k_ptr + kv_ptrs, mask=in_kv[:, None], other=0.0)
    v = tl.load(v_ptr + kv_ptrs, mask=in_kv[:, None], other=0.0)
    q_base = q_ptr + base
    do_base = do_ptr + base
    lse_base = lse_ptr + row_base
    delta_base = delta_ptr + row_base
    acc_ty = lse_ptr.dtype.element_ty
    dk = tl.zeros((BLOCK_N, HEAD_DIM), dtype=acc_ty)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=acc_ty)
    if SPARSE:
        kv_blk = start_n // SPARSE_KV
        for r in range(sparse_span_count(sparse, off_b, off_h, kv_blk)):
            lo, full_lo, full_hi, hi = sparse_span_bounds(sparse, off_b, off_h, kv_blk, r, SPARSE_Q)
            for start_m in range(lo, hi, BLOCK_M):
                dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_n, stride_d,
                                    start_m, offs_n, offs_d, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD,
                                    SCORE_GRAD, score_args, MASK_MOD, mask_args, CAUSAL, True, BLOCK_M, PRECISION,
                                    IN_RANGE, (start_m < full_lo) | (start_m >= full_hi))
    else:
        whole_end = N_CTX - N_CTX % BLOCK_M  # query blocks before this need no bounds mask
        if CAUSAL:
            # Queries in this key block's own rows see part of it (masked); later whole
            # query blocks see all of it; earlier ones none. BLOCK_N % BLOCK_M == 0.
            diag_end = start_n + BLOCK_N
            for start_m in range(start_n, tl.minimum(diag_end, N_CTX), BLOCK_M):
                dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_n, stride_d,
                                    start_m, offs_n, offs_d, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD,
                                    SCORE_GRAD, score_args, MASK_MOD, mask_args, CAUSAL, True, BLOCK_M, PRECISION,
                                    IN_RANGE, True)
            unmasked_start = diag_end
            tail_start = tl.maximum(diag_end, whole_end)
        else:
            unmasked_start = 0
            tail_start = whole_end
        for start_m in range(unmasked_start, whole_end, BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_n, stride_d,
                                start_m, offs_n, offs_d, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD,
                                SCORE_GRAD, score_args, MASK_MOD, mask_args, CAUSAL, False, BLOCK_M, PRECISION,
                                    IN_RANGE, True)
        for start_m in range(tail_start, N_CTX, BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_n, stride_d,
                                start_m, offs_n, offs_d, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD,
                                SCORE_GRAD, score_args, MASK_MOD, mask_args, CAUSAL, True, BLOCK_M, PRECISION,
                                    IN_RANGE, True)
    tl.store(dk_ptr + kv_ptrs, (dk * SM_SCALE).to(dk_ptr.dtype.element_ty), mask=in_kv[:, None])
    tl.store(dv_ptr + kv_ptrs, dv.to(dv_ptr.dtype.element_ty), mask=in_kv[:, None])


@triton.jit
def _dq_step(dq, q, do, lse, delta, k_base, v_base, stride_n, stride_d, start_n, offs_m, offs_d,
             sm_scale: tl.constexpr, off_b, off_h, N_CTX, SCORE_MOD: tl.constexpr, SCORE_GRAD: tl.constexpr,
             score_args, MASK_MOD: tl.constexpr, mask_args, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
             BLOCK_N: tl.constexpr, PRECISION: tl.constexpr, IN_RANGE: tl.constexpr, mask_now):
    """One KV block of a dQ program; `mask_now` as in the forward's step."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    t_ptrs = offs_n[None, :] * stride_n + offs_d[:, None] * stride_d  # HEAD_DIM x BLOCK_N
    if MASKED and not IN_RANGE:
        kt = tl.load(k_base + t_ptrs, mask=offs_n[None, :] < N_CTX, other=0.0)
        vt = tl.load(v_base + t_ptrs, mask=offs_n[None, :] < N_CTX, other=0.0)
    else:
        kt = tl.load(k_base + t_ptrs)
        vt = tl.load(v_base + t_ptrs)
    qk = tl.dot(q, kt, input_precision=PRECISION)
    q_idx = offs_m[:, None]
    kv_idx = offs_n[None, :]
    p = tl.exp2(scores_base2(qk, sm_scale, off_b, off_h, q_idx, kv_idx, N_CTX, SCORE_MOD, score_args)
                - lse[:, None])
    if MASKED:
        if mask_now:
            p = tl.where(allowed_of(off_b, off_h, q_idx, kv_idx, N_CTX, CAUSAL, MASK_MOD, mask_args, IN_RANGE), p, 0.0)
    dp = tl.dot(do, vt, input_precision=PRECISION)
    ds = p * (dp - delta[:, None])
    ds = score_mod_grad(ds, qk, sm_scale, off_b, off_h, q_idx, kv_idx, N_CTX, SCORE_GRAD, score_args)
    # K again, row-major, instead of tl.trans(kt): keeps both K loads pipelinable (see _dkdv_step)
    k_ptrs = k_base + offs_n[:, None] * stride_n + offs_d[None, :] * stride_d
    if MASKED and not IN_RANGE:
        k = tl.load(k_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
    else:
        k = tl.load(k_ptrs)
    return tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)


@triton.jit
def attention_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dq_ptr, lse_ptr, delta_ptr,
                            stride_z, stride_h, stride_n, stride_d, H, N_CTX,
                            sparse, SCORE_MOD: tl.constexpr, SCORE_GRAD: tl.constexpr, score_args,
                            MASK_MOD: tl.constexpr, mask_args,
                            HEAD_DIM: tl.constexpr, SM_SCALE: tl.constexpr, CAUSAL: tl.constexpr,
                            SPARSE: tl.constexpr,
                            SPARSE_Q: tl.constexpr, SPARSE_KV: tl.constexpr, PRECISION: tl.constexpr,
                            ON_GPU: tl.constexpr, IN_RANGE: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """`sparse`: () or the forward's spans (per Q block, of KV blocks)."""
    batch_head = tl.program_id(1)
    block_m = tl.program_id(0)
    if CAUSAL and not SPARSE:
        block_m, batch_head = causal_tile(True)  # costliest first, as in the forward
    off_b = batch_head // H
    off_h = batch_head % H
    base = off_b.to(tl.int64) * stride_z + off_h.to(tl.int64) * stride_h
    row_base = batch_head.to(tl.int64) * N_CTX
    start_m = block_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    in_q = offs_m < N_CTX
    q_ptrs = base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d
    q = tl.load(q_ptr + q_ptrs, mask=in_q[:, None], other=0.0)
    do = tl.load(do_ptr + q_ptrs, mask=in_q[:, None], other=0.0)
    lse = tl.load(lse_ptr + row_base + offs_m, mask=in_q, other=float("inf"))
    delta = tl.load(delta_ptr + row_base + offs_m, mask=in_q, other=0.0)
    k_base = k_ptr + base
    v_base = v_ptr + base
    dq = tl.zeros((BLOCK_M, HEAD_DIM), dtype=lse_ptr.dtype.element_ty)
    if SPARSE:
        q_blk = start_m // SPARSE_Q
        for r in range(sparse_span_count(sparse, off_b, off_h, q_blk)):
            lo, full_lo, full_hi, hi = sparse_span_bounds(sparse, off_b, off_h, q_blk, r, SPARSE_KV)
            for start_n in range(lo, hi, BLOCK_N):
                dq = _dq_step(dq, q, do, lse, delta, k_base, v_base, stride_n, stride_d, start_n, offs_m,
                              offs_d, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD, SCORE_GRAD, score_args, MASK_MOD,
                              mask_args, CAUSAL, True, BLOCK_N, PRECISION, IN_RANGE,
                              (start_n < full_lo) | (start_n >= full_hi))
    else:
        if CAUSAL:
            unmasked_end = start_m  # BLOCK_M % BLOCK_N == 0
            masked_end = tl.minimum(start_m + BLOCK_M, N_CTX)
        else:
            unmasked_end = N_CTX - N_CTX % BLOCK_N
            masked_end = N_CTX
        for start_n in range(0, unmasked_end, BLOCK_N):
            dq = _dq_step(dq, q, do, lse, delta, k_base, v_base, stride_n, stride_d, start_n, offs_m,
                          offs_d, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD, SCORE_GRAD, score_args, MASK_MOD,
                          mask_args, CAUSAL, False, BLOCK_N, PRECISION, IN_RANGE, True)
        for start_n in range(unmasked_end, masked_end, BLOCK_N):
            dq = _dq_step(dq, q, do, lse, delta, k_base, v_base, stride_n, stride_d, start_n, offs_m,
                          offs_d, SM_SCALE, off_b, off_h, N_CTX, SCORE_MOD, SCORE_GRAD, score_args, MASK_MOD,
                          mask_args, CAUSAL, True, BLOCK_N, PRECISION, IN_RANGE, True)
    tl.store(dq_ptr + q_ptrs, (dq * SM_SCALE).to(dq_ptr.dtype.element_ty), mask=in_q[:, None])
