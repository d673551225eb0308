"""Kernels as Inductor writes them under dynamic shapes: sizes are plain arguments with no
divisibility known (`do_not_specialize`, which is what Inductor's attributes say of a
symbolic size), so every access whose stride is a size is 2-byte aligned as far as the
compiler knows. Loaded once per compiler by `dynamic_shapes_gpu.py`.

- `triton_mm`: Inductor's mm template (torch/_inductor/kernel/mm.py) with M, N, K as
  `ks0..ks2`, the K tail masked;
- `ln_kernel`: a looped Welford layer norm over rows of `r0_numel` (stride `ks0`);
- `rms_kernel`: a looped mean of squares.
"""
import triton
import triton.language as tl

DNS = ["ks0", "xnumel", "r0_numel"]


@triton.jit(do_not_specialize=["ks0", "ks1", "ks2"])
def triton_mm(arg_A, arg_B, out_ptr0, ks0, ks1, ks2, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    ACC_TYPE: tl.constexpr = tl.float32
    INDEX_DTYPE: tl.constexpr = tl.int32
    A = arg_A
    B = arg_B
    M = ks0
    N = ks1
    K = ks2
    if M * N == 0:
        return
    stride_am = ks2
    stride_ak = 1
    stride_bk = ks1
    stride_bn = 1
    pid = tl.program_id(0).to(INDEX_DTYPE)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if ((stride_am == 1 and stride_ak == M) or (stride_am == K and stride_ak == 1)) and (M >= BLOCK_M and K > 1):
        offs_a_m = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    else:
        offs_a_m = rm % M
    if ((stride_bk == 1 and stride_bn == K) or (stride_bk == N and stride_bn == 1)) and (N >= BLOCK_N and K > 1):
        offs_b_n = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    else:
        offs_b_n = rn % N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)
    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
        a_k_idx_vals = offs_k[None, :] + (k_idx * BLOCK_K)
        b_k_idx_vals = offs_k[:, None] + (k_idx * BLOCK_K)
        idx_m = offs_a_m[:, None]
        idx_n = a_k_idx_vals
        xindex = idx_n + ks2 * idx_m
        a = tl.load(A + (xindex), mask=offs_k[None, :] < (K - k_idx * BLOCK_K), other=0.0)
        idx_m = b_k_idx_vals
        idx_n = offs_b_n[None, :]
        xindex = idx_n + ks1 * idx_m
        b = tl.load(B + (xindex), mask=offs_k[:, None] < (K - k_idx * BLOCK_K), other=0.0)
        acc += tl.dot(a, b, allow_tf32=False, out_dtype=ACC_TYPE)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
    xindex = idx_n + ks1 * idx_m
    tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), acc, mask)


@triton.jit(do_not_specialize=DNS)
def ln_kernel(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, out_ptr0, ks0, xnumel, r0_numel, XBLOCK: tl.constexpr,
              R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    mean = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    m2 = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    wt = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp0 = tl.load(in_ptr0 + (r0_index + ks0 * x0),
                       r0_mask & xmask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        wt_n = wt + 1.0
        delta = tmp0 - mean
        mean_n = mean + delta / wt_n
        m2_n = m2 + delta * (tmp0 - mean_n)
        mean = tl.where(r0_mask & xmask, mean_n, mean)
        m2 = tl.where(r0_mask & xmask, m2_n, m2)
        wt = tl.where(r0_mask & xmask, wt_n, wt)
    s = tl.sum(mean * wt, 1)[:, None]
    n = tl.sum(wt, 1)[:, None]
    mu = s / n
    var = tl.sum(m2 + wt * (mean - mu) * (mean - mu), 1)[:, None] / n
    rstd = tl.rsqrt(var + 1e-5)
    tl.store(in_out_ptr0 + x0, rstd, xmask)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp9 = tl.load(in_ptr0 + (r0_index + ks0 * x0),
                       r0_mask & xmask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp11 = tl.load(in_ptr1 + r0_index, r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp13 = tl.load(in_ptr2 + r0_index, r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        out = (tmp9 - mu) * rstd * tmp11 + tmp13
        tl.store(out_ptr0 + (r0_index + ks0 * x0), out.to(tl.float16), r0_mask & xmask)


@triton.jit(do_not_specialize=DNS)
def rms_kernel(in_ptr0, out_ptr0, ks0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    acc = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp0 = tl.load(in_ptr0 + (r0_index + ks0 * xindex),
                       r0_mask & xmask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        acc = tl.where(r0_mask & xmask, acc + tmp0 * tmp0, acc)
    tl.store(out_ptr0 + xindex, tl.sum(acc, 1)[:, None] / r0_numel, xmask)
