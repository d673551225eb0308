"""Kernels with warp-specialized loops (`tl.range(..., warp_specialize=True)`), shared by
the emulator's tests of the split (test_warp_specialize_emulated.py) and the end-to-end
tests on every backend (tests/e2e/test_warp_specialize.py), with their compile
signatures."""
from __future__ import annotations

import tegula
import tegula.language as tl


@tegula.jit
def _operand_descriptors(a_ptr, b_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                         B_NK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    if B_NK:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BN, BK])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    return a_desc, b_desc


@tegula.jit
def _output_tile(a_desc, b_desc, c_ptr, M, N, K, pm, pn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 B_NK: tl.constexpr, WS: tl.constexpr):
    """C's tile (pm, pn): the K loop (specialized with WS) and the store."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), warp_specialize=WS):
        a = a_desc.load([pm * BM, k * BK])
        if B_NK:
            b = b_desc.load([pn * BN, k * BK]).T
        else:
            b = b_desc.load([k * BK, pn * BN])
        acc = tl.dot(a, b, acc)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@tegula.jit
def ws_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              B_NK: tl.constexpr, WS: tl.constexpr):
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    a_desc, b_desc = _operand_descriptors(a_ptr, b_ptr, M, N, K, BM, BN, BK, B_NK)
    _output_tile(a_desc, b_desc, c_ptr, M, N, K, pid // num_n, pid % num_n, BM, BN, BK, B_NK, WS)


@tegula.jit
def ws_persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                         B_NK: tl.constexpr, WS: tl.constexpr):
    """`ws_matmul` persistent: the programs walk the output tiles round robin, each
    tile's K loop the specialized one (its rings turn across tiles)."""
    num_n = tl.cdiv(N, BN)
    a_desc, b_desc = _operand_descriptors(a_ptr, b_ptr, M, N, K, BM, BN, BK, B_NK)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * num_n, tl.num_programs(0)):
        _output_tile(a_desc, b_desc, c_ptr, M, N, K, tile // num_n, tile % num_n, BM, BN, BK, B_NK, WS)


@tegula.jit
def ws_attention(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, H, N_CTX, D: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr, CAUSAL: tl.constexpr, WS: tl.constexpr):
    """Tutorial 06's forward on Hopper with warp specialization: device descriptors over
    all heads (shape Z*H*N_CTX rows), K and V at coordinates carried by the loop."""
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    rows = off_hz * N_CTX  # (batch * H + head) * N_CTX
    desc_q = tl.make_tensor_descriptor(q_ptr, [H * N_CTX * 2, D], [D, 1], [BM, D])
    desc_k = tl.make_tensor_descriptor(k_ptr, [H * N_CTX * 2, D], [D, 1], [BN, D])
    desc_v = tl.make_tensor_descriptor(v_ptr, [H * N_CTX * 2, D], [D, 1], [BN, D])
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    m_i = tl.zeros([BM], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BM], dtype=tl.float32) + 1.0
    acc = tl.zeros([BM, D], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([rows + start_m * BM, 0])
    hi = (start_m + 1) * BM if CAUSAL else N_CTX
    offset_kv = rows
    for start_n in tl.range(0, hi, BN, warp_specialize=WS):
        k = desc_k.load([offset_kv, 0]).T
        qk = tl.dot(q, k)
        if CAUSAL:
            qk = qk * qk_scale + tl.where(offs_m[:, None] >= start_n + offs_n[None, :], 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        acc = acc * alpha[:, None]
        v = desc_v.load([offset_kv, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
        offset_kv += BN
    acc = acc / l_i[:, None]
    o_rows = rows + offs_m
    tl.store(o_ptr + o_rows[:, None] * D + tl.arange(0, D)[None, :], acc.to(tl.float16),
             mask=(offs_m < N_CTX)[:, None])


MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
          "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "B_NK": "constexpr", "WS": "constexpr"}
MM_ATTRS = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": 16, "N": 16, "K": 16}
ATT_SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "sm_scale": "fp32", "H": "i32",
           "N_CTX": "i32", "D": "constexpr", "BM": "constexpr", "BN": "constexpr", "CAUSAL": "constexpr",
           "WS": "constexpr"}
ATT_ATTRS = {"q_ptr": 16, "k_ptr": 16, "v_ptr": 16, "o_ptr": 16, "N_CTX": 16}
