"""`attention(q, k, v, ...)`: fused attention with autograd, on CPU or CUDA torch tensors.

The host side of the kernels in attention_fwd.py / attention_bwd.py: argument checks,
the choice between the dense path (no mask_mod: causal skipping built in) and the
block-sparse path (a BlockMask, built from mask_mod when not given), the forward's
choice between tensor descriptors (TMA on Hopper) and pointers, the autotuned
launches, and a `torch.autograd.Function` whose backward runs the three FA2 kernels.
"""
from __future__ import annotations

import math
from typing import Optional

import tegula as triton
from tegula.kernels import attention_configs as cfg
from tegula.kernels.attention_bwd import attention_bwd_dkdv_kernel, attention_bwd_dq_kernel, attention_bwd_preprocess
from tegula.kernels.attention_configs import LARGEST_BLOCK
from tegula.kernels.attention_fwd import attention_fwd_kernel
from tegula.kernels.flex import BlockMask, as_mask_mod, as_score_mod, create_block_mask
from tegula.tools.tensor_descriptor import TensorDescriptor

_fwd = triton.autotune(configs=cfg.FWD_HOST + cfg.FWD_GPU, key=cfg.FWD_TUNING_KEY,
                       prune_configs_by=cfg.FWD_PRUNE)(attention_fwd_kernel)
_dkdv = triton.autotune(configs=cfg.DKDV_HOST + cfg.DKDV_GPU, key=cfg.TUNING_KEY,
                        prune_configs_by=cfg.DKDV_PRUNE)(attention_bwd_dkdv_kernel)
_dq = triton.autotune(configs=cfg.DQ_HOST + cfg.DQ_GPU, key=cfg.TUNING_KEY,
                      prune_configs_by=cfg.DQ_PRUNE)(attention_bwd_dq_kernel)


class _Plan:
    """Everything a launch needs besides the tensors, decided once in forward."""

    def __init__(self, q, causal, sm_scale, score_mod, mask_mod, block_mask):
        import torch
        Z, H, N, D = q.shape
        if D < 16 or D & (D - 1):
            raise ValueError(f"head dim must be a power of two >= 16, got {D}")
        self.sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
        self.score_mod = as_score_mod(score_mod)
        mask_mod = as_mask_mod(mask_mod)
        if block_mask is not None:
            if block_mask.n_ctx != N:
                raise ValueError(f"block mask built for N={block_mask.n_ctx}, inputs have N={N}")
            if causal and not block_mask.causal:
                raise ValueError("causal=True with a block mask built without causal: build it with causal=True")
            causal = block_mask.causal
            mask_mod = mask_mod or block_mask.mask_mod
        elif mask_mod is not None:
            # The mask may depend on b and h: evaluate it for each (create_block_mask
            # with B=1/H=1 by hand is cheaper when it does not).
            block_mask = create_block_mask(mask_mod, Z, H, N, q.device, causal=causal)
        self.causal, self.mask_mod, self.block_mask = causal, mask_mod, block_mask
        self.head_dim, self.H, self.N, self.Z = D, H, N, Z
        self.acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        self.ieee = q.dtype in (torch.float32, torch.float64)  # not TF32: fp32 users expect fp32
        self.on_gpu = q.is_cuda
        # every block of every config lies inside the sequence: no bounds masks needed
        self.in_range = N % LARGEST_BLOCK == 0

    def constexprs(self, backward: bool) -> dict:
        s, m, bm = self.score_mod, self.mask_mod, self.block_mask
        out = dict(SCORE_MOD=None if s is None else s.fn, score_args=() if s is None else tuple(s.args),
                   MASK_MOD=None if m is None else m.fn, mask_args=() if m is None else tuple(m.args),
                   HEAD_DIM=self.head_dim, SM_SCALE=self.sm_scale, CAUSAL=self.causal, SPARSE=bm is not None,
                   SPARSE_Q=bm.q_block if bm else 1, SPARSE_KV=bm.kv_block if bm else 1,
                   PRECISION="ieee" if self.ieee else "tf32",
                   ON_GPU=self.on_gpu, IN_RANGE=self.in_range)
        if backward:
            if s is not None and s.grad is None:
                raise NotImplementedError("this score_mod has no gradient rule: give ScoreMod(fn, grad=...) "
                                          "(grad='identity' for an additive bias) to differentiate through it")
            out["SCORE_GRAD"] = None if s is None or s.grad == "identity" else s.grad
        return out

    def one_span(self) -> bool:
        """Whether the forward's Q blocks each walk at most one span of the block mask."""
        return self.block_mask is not None and self.block_mask.most_spans(self.Z, self.H, False) <= 1

    def sparse_args(self, transposed: bool) -> tuple:
        """The BlockMask's spans as the kernels take them (flex.BlockMask.kernel_args)."""
        if self.block_mask is None:
            return ()
        return self.block_mask.kernel_args(self.Z, self.H, transposed)


def forward_descriptors_apply(*tensors) -> bool:
    """Whether the forward reads q, k, v and writes o (contiguous [Z, H, N, D] tensors)
    through tensor descriptors over their Z*H*N rows (TMA copies on Hopper): 16-bit
    inputs (the element types TMA feeds wgmma with) whose length N is a multiple of every
    block, in 16-byte aligned storage as TMA requires. Other inputs take the pointer
    path, which masks the ragged last block instead."""
    import torch
    N, D = tensors[0].shape[-2:]
    return (tensors[0].dtype in (torch.float16, torch.bfloat16) and N % LARGEST_BLOCK == 0
            and D * tensors[0].element_size() % 16 == 0 and all(t.data_ptr() % 16 == 0 for t in tensors))


def _row_descriptors(*tensors):
    """[Z, H, N, D] contiguous tensors as descriptors over their Z*H*N rows; the blocks
    are set per config (attention_configs.descriptor_blocks)."""
    descs = []
    for t in tensors:
        rows, d = t.numel() // t.shape[-1], t.shape[-1]
        descs.append(TensorDescriptor(t, shape=[rows, d], strides=[d, 1], block_shape=[1, d]))
    return descs


def _forward(q, k, v, plan: _Plan):
    import torch
    Z, H, N, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((Z, H, N), device=q.device, dtype=plan.acc_dtype)
    def grid(meta):
        if meta.get("PERSISTENT"):  # one program per SM walking the tiles
            return (min(triton.cdiv(N, meta["BLOCK_M"]) * Z * H, _program_slots(q)), 1)
        return (triton.cdiv(N, meta["BLOCK_M"]), Z * H)
    tensors = (q, k, v, o)
    desc = forward_descriptors_apply(*tensors)
    if desc:
        tensors = _row_descriptors(*tensors)
    _fwd[grid](*tensors, lse, *q.stride(), H, N, plan.sparse_args(False),
               **plan.constexprs(backward=False), DESC=desc, ONE_SPAN=plan.one_span(), ZH=Z * H)
    return o, lse


def _program_slots(q) -> int:
    """How many programs a persistent launch on q's device runs: one per SM (a
    persistent config's programs each hold an SM's shared memory)."""
    import torch
    if not q.is_cuda:
        return 1
    return torch.cuda.get_device_properties(q.device).multi_processor_count


def _backward(q, k, v, o, lse, do, plan: _Plan):
    import torch
    Z, H, N, D = q.shape
    delta = torch.empty_like(lse)
    block = 64 if plan.on_gpu else 32
    attention_bwd_preprocess[(triton.cdiv(N, block), Z * H)](o, do, delta, *q.stride(), H, N,
                                                              HEAD_DIM=D, BLOCK_M=block)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    consts = plan.constexprs(backward=True)
    _dkdv[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), Z * H)](
        q, k, v, do, dk, dv, lse, delta, *q.stride(), H, N, plan.sparse_args(True), **consts)
    _dq[lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), Z * H)](
        q, k, v, do, dq, lse, delta, *q.stride(), H, N, plan.sparse_args(False), **consts)
    return dq, dk, dv


def _autograd_function():
    import torch

    class FusedAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, plan):
            o, lse = _forward(q, k, v, plan)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.plan = plan
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            dq, dk, dv = _backward(q, k, v, o, lse, do.contiguous(), ctx.plan)
            return dq, dk, dv, None
    return FusedAttention


_FUNCTION = None


def attention(q, k, v, causal: bool = False, sm_scale: Optional[float] = None, score_mod=None, mask_mod=None,
              block_mask: Optional[BlockMask] = None):
    """softmax(score_mod(q k^T * sm_scale) masked) v over [Z, H, N, D] tensors (fp16, bf16,
    fp32 or fp64; fp32 accumulation, fp64 for fp64), differentiable in q, k and v.

    `score_mod`: a ScoreMod or jit function `(score, b, h, q_idx, kv_idx, *args)`;
    `mask_mod`: a MaskMod or jit function `(b, h, q_idx, kv_idx, *args)` -> bool;
    `block_mask`: a BlockMask (from `create_block_mask`) to skip blocks where nothing
    attends; built from mask_mod when only that is given. fp32 inputs use IEEE fp32
    dots (not TF32). Rows where nothing attends give 0."""
    global _FUNCTION
    if q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must have one shape [Z, H, N, D]: {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must have one dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    plan = _Plan(q, causal, sm_scale, score_mod, mask_mod, block_mask)
    if _FUNCTION is None:
        _FUNCTION = _autograd_function()
    return _FUNCTION.apply(q, k, v, plan)
