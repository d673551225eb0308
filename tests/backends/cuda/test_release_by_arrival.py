"""Which TMA loops release their slots by the warps' mbarrier arrivals rather than a CTA
barrier per iteration (`pipeline_loops._releases_by_arrival`): by default, loops of two
or more warpgroups that compute on their dots' results within the iteration (the
attention forward's softmax), where the warpgroups gain from drifting apart; not a
matmul, whose dots only accumulate (measured slower there). TEGULA_TMA_RELEASE_BY_ARRIVAL
forces either way. Checked on the sm_90a tgir."""
from __future__ import annotations

import pytest

import tegula
from tegula.backends.compiler import GPUTarget
from tegula.compiler import ASTSource


def _attention_forward_tgir(num_warps: int) -> str:
    from tegula.kernels.attention_fwd import attention_fwd_kernel
    BM, BN, D = 128, 64, 64
    sig = {"q_ptr": f"tensordesc<fp16[{BM}, {D}]>", "k_ptr": f"tensordesc<fp16[{BN}, {D}]>",
           "v_ptr": f"tensordesc<fp16[{BN}, {D}]>", "out_ptr": f"tensordesc<fp16[{BM}, {D}]>", "lse_ptr": "*fp32",
           "stride_z": "i32", "stride_h": "i32", "stride_n": "i32", "stride_d": "i32", "H": "i32", "N_CTX": "i32",
           "ZH": "i32"}
    cx = dict(sparse=(), SCORE_MOD=None, score_args=(), MASK_MOD=None, mask_args=(), HEAD_DIM=D, SM_SCALE=0.125,
              CAUSAL=False, SPARSE=False, SPARSE_Q=1, SPARSE_KV=1, PRECISION="tf32", ON_GPU=True, IN_RANGE=True,
              DESC=True, BLOCK_M=BM, BLOCK_N=BN)
    sig.update({k: "constexpr" for k in cx})
    attrs = {**{n: 16 for n in ("lse_ptr", "stride_z", "stride_h", "stride_n", "N_CTX")},
             **{f"{d}.{i}": 16 for d in ("q_ptr", "k_ptr", "v_ptr", "out_ptr") for i in range(4)}}
    return _tgir(attention_fwd_kernel, sig, cx, attrs, num_warps)


def _matmul_desc_tgir(num_warps: int) -> str:
    from benchmarks.load import load_tegula_kernels
    mod = load_tegula_kernels()
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32", "BLOCK_M": "constexpr",
           "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
    cx = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
    attrs = {k: 16 for k in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm")}
    return _tgir(mod.matmul_desc_kernel, sig, cx, attrs, num_warps)


def _tgir(fn, sig, cx, attrs, num_warps) -> str:
    ck = tegula.compile(ASTSource(fn, sig, cx, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                        options={"num_warps": num_warps, "num_stages": 3})
    tgir = ck.asm["tgir"]
    assert "tma_load" in tgir
    return tgir


def _by_arrival(tgir: str) -> bool:
    arrival, barrier = "mbarrier_arrive" in tgir, "debug_barrier" in tgir
    assert arrival != barrier  # one release or the other
    return arrival


@pytest.fixture
def fresh(monkeypatch):
    """No compiled kernel reused across the knob's settings (the knob is in the cache key;
    this also keeps each case from reading another's disk cache entry)."""
    monkeypatch.setenv("TEGULA_ALWAYS_COMPILE", "1")
    return monkeypatch


@pytest.mark.parametrize("setting, attention8, attention4, matmul8", [
    (None, True, False, False), ("auto", True, False, False), ("1", True, True, True), ("0", False, False, False)])
def test_which_loops_release_by_arrival(fresh, setting, attention8, attention4, matmul8):
    if setting is None:
        fresh.delenv("TEGULA_TMA_RELEASE_BY_ARRIVAL", raising=False)
    else:
        fresh.setenv("TEGULA_TMA_RELEASE_BY_ARRIVAL", setting)
    assert _by_arrival(_attention_forward_tgir(8)) is attention8
    assert _by_arrival(_attention_forward_tgir(4)) is attention4
    assert _by_arrival(_matmul_desc_tgir(8)) is matmul8
