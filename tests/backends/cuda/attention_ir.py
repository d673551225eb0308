"""The library's attention forward as optimized tile IR at the descriptor path's D128
config (128x128 blocks, warp-specialized, sm_90a signature), for the tests of the GPU
stage's passes on it (`tile_prefetch`, `store_buffers`)."""
from __future__ import annotations

from tegula.compiler import ASTSource
from tegula.kernels.attention_fwd import attention_fwd_kernel
from tegula.runtime.compiler import optimized_ir


def persistent_forward_ir(causal: bool, D: int = 128, BM: int = 128, BN: int = 128):
    """The persistent forward (`PERSISTENT=True`, causal on one loop), its descriptors
    and strides known to be 16-aligned."""
    sig = {"q_ptr": f"tensordesc<fp16[{BM}, {D}]>", "k_ptr": f"tensordesc<fp16[{BN}, {D}]>",
           "v_ptr": f"tensordesc<fp16[{BN}, {D}]>", "out_ptr": f"tensordesc<fp16[{BM}, {D}]>", "lse_ptr": "*fp32",
           "stride_z": "i32", "stride_h": "i32", "stride_n": "i32", "stride_d": "i32", "H": "i32", "N_CTX": "i32",
           "ZH": "i32"}
    cx = dict(sparse=(), SCORE_MOD=None, score_args=(), MASK_MOD=None, mask_args=(), HEAD_DIM=D,
              SM_SCALE=D ** -0.5, CAUSAL=causal, SPARSE=False, SPARSE_Q=1, SPARSE_KV=1, PRECISION="tf32",
              ON_GPU=True, IN_RANGE=True, DESC=True, BLOCK_M=BM, BLOCK_N=BN, WARP_SPECIALIZE=True,
              ONE_LOOP=causal, PERSISTENT=True, ONE_SPAN=False)
    sig.update({name: "constexpr" for name in cx})
    attrs = {**{n: 16 for n in ("lse_ptr", "stride_z", "stride_h", "stride_n", "N_CTX")},
             **{f"{d}.{i}": 16 for d in ("q_ptr", "k_ptr", "v_ptr", "out_ptr") for i in range(4)}}
    return optimized_ir(ASTSource(attention_fwd_kernel, signature=sig, constexprs=cx, attrs=attrs))
