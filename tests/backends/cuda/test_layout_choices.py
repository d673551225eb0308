"""Layout choices of `assign_layouts` that decide whether a loop converts through shared
memory every iteration: loop-carried values follow what updates them (not a constant
init shared with code after the loop), and loads smaller than the CTA are done in the
layout their user wants. Checked on the `tgir` text (no `convert_layout ... smem` in
the loop body) and on the emulator against numpy."""
from __future__ import annotations

import re

import numpy as np
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas


@tegula.jit
def row_sums_of_products(a_ptr, b_ptr, m_ptr, l_ptr, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Attention's row statistics: l = l * alpha + rowsum(p) in the loop with p from a
    dot, the zero init of l also serving `l == 0.0` after the loop (one constant after
    CSE); m a 1-D load (fewer elements than threads) broadcast against the dot."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    l_i = tl.zeros((BM,), dtype=tl.float32)
    for n in range(0, N, BN):
        b = tl.load(b_ptr + rk[:, None] * N + (n + rn)[None, :])
        m = tl.load(m_ptr + n + rn)
        p = tl.dot(a, b) - m[None, :]
        l_i = l_i * 0.5 + tl.sum(p, 1)
    tl.store(l_ptr + rm, tl.where(l_i == 0.0, 1.0, l_i))


def _loop_text(tgir: str) -> str:
    start = tgir.index(" = for ")
    depth, i = 0, tgir.index("{", start)
    for j in range(i, len(tgir)):
        depth += {"{": 1, "}": -1}.get(tgir[j], 0)
        if depth == 0:
            return tgir[i:j]
    return tgir[i:]


def _small_int_operands(capability: int, BM: int, BK: int, N: int):
    rng = np.random.default_rng(capability)
    return rng, rng.integers(-2, 3, (BM, BK)).astype(np.float16), rng.integers(-2, 3, (BK, N)).astype(np.float16)


def _assert_loop_converts_nothing_through_shared(kernel, capability: int) -> None:
    tgir = compile_kernel(kernel, {"num_warps": 4, "num_stages": 1}, capability)[0]["tgir"]
    body = _loop_text(tgir)
    assert not [ln for ln in body.splitlines() if "convert_layout" in ln and "smem(" in ln], body


def test_row_statistics_stay_in_the_dot_layout():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "m_ptr": "*fp32", "l_ptr": "*fp32", "N": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    BM, BN, BK, N = 64, 32, 32, 96
    kernel = tir_opt(row_sums_of_products, sig, {"BM": BM, "BN": BN, "BK": BK},
                     attrs={"a_ptr": 16, "b_ptr": 16, "m_ptr": 16, "l_ptr": 16, "N": 16})
    for capability in (80, 90):
        _assert_loop_converts_nothing_through_shared(kernel, capability)
        rng, a, b = _small_int_operands(capability, BM, BK, N)
        m = rng.integers(-3, 4, N).astype(np.float32)
        out = np.zeros(BM, np.float32)
        EmulatedKernel(kernel, 4, capability=capability, num_stages=1).run((1, 1, 1), [a, b, m, out, N])
        want = np.zeros(BM)
        for n in range(0, N, BN):
            p = a.astype(np.float64) @ b[:, n:n + BN].astype(np.float64) - m[n:n + BN][None, :]
            want = want * 0.5 + p.sum(1)
        np.testing.assert_array_equal(out, np.where(want == 0.0, 1.0, want))


@tegula.jit
def masked_row_softmax_sums(a_ptr, b_ptr, l_ptr, N, MASK_FROM, BM: tl.constexpr, BN: tl.constexpr,
                            BK: tl.constexpr):
    """A block-sparse attention step: the score block from a dot is masked only in some
    blocks (a run-time `if`), then shifted by its broadcast row maximum."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    l_i = tl.zeros((BM,), dtype=tl.float32)
    for n in range(0, N, BN):
        b = tl.load(b_ptr + rk[:, None] * N + (n + rn)[None, :])
        s = tl.dot(a, b)
        if n >= MASK_FROM:
            s = tl.where(rm[:, None] >= (n + rn)[None, :] - MASK_FROM, s, -1.0e30)
        row_max = tl.max(s, 1)
        l_i += tl.sum(tl.exp2(s - row_max[:, None]), 1)
    tl.store(l_ptr + rm, l_i)


def test_a_branch_merged_score_block_keeps_the_dot_layout():
    """The `if`'s result is what its branches yield (a dot result): it keeps the dot's
    layout, rather than taking the broadcast row maximum's and moving the whole block
    through shared memory every iteration (the forward of a block-sparse attention ran
    1.75x slower so)."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "l_ptr": "*fp32", "N": "i32", "MASK_FROM": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    BM, BN, BK, N, mask_from = 64, 32, 32, 96, 32
    kernel = tir_opt(masked_row_softmax_sums, sig, {"BM": BM, "BN": BN, "BK": BK},
                     attrs={"a_ptr": 16, "b_ptr": 16, "l_ptr": 16, "N": 16})
    for capability in (80, 90):
        _assert_loop_converts_nothing_through_shared(kernel, capability)
        _rng, a, b = _small_int_operands(capability, BM, BK, N)
        out = np.zeros(BM, np.float32)
        EmulatedKernel(kernel, 4, capability=capability, num_stages=1).run((1, 1, 1), [a, b, out, N, mask_from])
        want = np.zeros(BM)
        for n in range(0, N, BN):
            s = a.astype(np.float64) @ b[:, n:n + BN].astype(np.float64)
            if n >= mask_from:
                s = np.where(np.arange(BM)[:, None] >= (n + np.arange(BN))[None, :] - mask_from, s, -1.0e30)
            want += np.exp2(s - s.max(1, keepdims=True)).sum(1)
        np.testing.assert_allclose(out, want, rtol=1e-5)


@tegula.jit
def carried_through_spans(a_ptr, b_ptr, v_ptr, o_ptr, SPANS, SPAN, BM: tl.constexpr, BN: tl.constexpr,
                          BK: tl.constexpr):
    """The rotated attention's P through a block-sparse walk: an outer loop over spans
    carries P (zeros at first) into each span's loop, whose steps add the P·V of the
    previous block and compute the next P from a dot."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    acc = tl.zeros((BM, BK), dtype=tl.float32)
    p = tl.zeros((BM, BN), dtype=tl.float16)
    prev = 0
    for r in range(SPANS):
        for n in range(r * SPAN, r * SPAN + SPAN, BN):
            v = tl.load(v_ptr + (prev + rn)[:, None] * BK + rk[None, :])
            acc = tl.dot(p, v, acc)
            b = tl.load(b_ptr + rk[:, None] * (SPANS * SPAN) + (n + rn)[None, :])
            p = (tl.dot(a, b) * 0.25).to(tl.float16)
            prev = n
    v = tl.load(v_ptr + (prev + rn)[:, None] * BK + rk[None, :])
    acc = tl.dot(p, v, acc)
    tl.store(o_ptr + rm[:, None] * BK + rk[None, :], acc)


def test_a_value_carried_into_an_inner_loop_follows_what_updates_it():
    """P's carried layout in the span loop is what its update gives (the dot's), not the
    default layout of the outer loop's zeros, which moved P through shared memory before
    every dot (the rotated window forward ran 1.76x slower so)."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32", "SPANS": "i32", "SPAN": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    BM, BN, BK, spans, span = 64, 32, 32, 2, 64
    kernel = tir_opt(carried_through_spans, sig, {"BM": BM, "BN": BN, "BK": BK},
                     attrs={"a_ptr": 16, "b_ptr": 16, "v_ptr": 16, "o_ptr": 16, "SPAN": 16})
    N = spans * span
    for capability in (80, 90):
        _assert_loop_converts_nothing_through_shared(kernel, capability)
        rng, a, b = _small_int_operands(capability, BM, BK, N)
        v = rng.integers(-2, 3, (N, BK)).astype(np.float16)
        out = np.zeros((BM, BK), np.float32)
        EmulatedKernel(kernel, 4, capability=capability, num_stages=1).run((1, 1, 1), [a, b, v, out, spans, span])
        want, p, prev = np.zeros((BM, BK)), np.zeros((BM, BN)), 0
        for n in range(0, N, BN):
            want += p @ v[prev:prev + BN].astype(np.float64)
            p, prev = (a.astype(np.float64) @ b[:, n:n + BN].astype(np.float64)) * 0.25, n
        want += p @ v[prev:prev + BN].astype(np.float64)
        np.testing.assert_array_equal(out, want)


@tegula.jit
def forward_substitution(a_ptr, out_ptr, T, BC: tl.constexpr):
    """fla's in-register triangular solve (chunk_gated_delta_rule's kkt_solve kernel):
    each step reduces a row of the loop-invariant A and a column-weighted sum of the
    carried inverse, then writes the new row into the carried tile. The vector broadcast
    against the carried tile must not pull that tile into the vector's transposed layout
    (a 16x16 tile through shared memory in every step)."""
    o_i = tl.arange(0, BC)
    b_A = tl.load(a_ptr + o_i[:, None] * BC + o_i[None, :])
    b_A = tl.where(o_i[:, None] > o_i[None, :], b_A, 0.)
    b_Ai = -b_A
    for i in range(2, min(BC, T)):
        b_a = tl.sum(tl.where((o_i == i)[:, None], -b_A, 0.), 0)
        b_a = tl.where(o_i < i, b_a, 0.)
        b_a = b_a + tl.sum(b_a[:, None] * b_Ai, 0)
        b_Ai = tl.where((o_i == i)[:, None], b_a, b_Ai)
    b_Ai += o_i[:, None] == o_i[None, :]
    tl.store(out_ptr + o_i[:, None] * BC + o_i[None, :], b_Ai)


def test_forward_substitution_keeps_the_carried_tile_in_place():
    sig = {"a_ptr": "*fp32", "out_ptr": "*fp32", "T": "i32", "BC": "constexpr"}
    BC = 16
    kernel = tir_opt(forward_substitution, sig, {"BC": BC}, attrs={"a_ptr": 16, "out_ptr": 16})
    for num_warps in (1, 4):
        tgir = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 1}, 90)[0]["tgir"]
        moved = [ln for ln in _loop_text(tgir).splitlines() if "convert_layout" in ln and "smem(" in ln]
        assert not [ln for ln in moved if f"tile<{BC}x{BC}x" in ln], moved
        rng = np.random.default_rng(num_warps)
        a = rng.uniform(-0.5, 0.5, (BC, BC)).astype(np.float32)
        for T in (BC, 11):
            out = np.full((BC, BC), np.nan, np.float32)
            EmulatedKernel(kernel, num_warps, capability=90, num_stages=1).run((1, 1, 1), [a, out, T])
            want = -np.tril(a.astype(np.float64), -1)
            for i in range(2, min(BC, T)):
                row = want[i].copy()
                row[i:] = 0.0
                want[i] = row + row @ want
            np.testing.assert_allclose(out, want + np.eye(BC), rtol=1e-5, atol=1e-5)


@tegula.jit
def forward_substitution_of_loaded_rows(a_ptr, d_ptr, out_ptr, T, BC: tl.constexpr):
    """fla's KDA solve (chunk_kda_fwd_kernel_inter_solve_fused): each step loads a row,
    weights the carried inverse's rows by it (`b_a[:, None] * b_Ai`), adds the column
    sums to the row and writes it into the carried tile."""
    o_i = tl.arange(0, BC)
    b_Ai = tl.load(d_ptr + o_i[:, None] * BC + o_i[None, :])
    b_Ai = -tl.where(o_i[:, None] > o_i[None, :], b_Ai, 0)
    for i in range(2, min(BC, T)):
        b_a = -tl.load(a_ptr + i * BC + o_i)
        b_a = tl.where(o_i < i, b_a, 0.)
        b_a += tl.sum(b_a[:, None] * b_Ai, 0)
        b_Ai = tl.where((o_i == i)[:, None], b_a, b_Ai)
    tl.store(out_ptr + o_i[:, None] * BC + o_i[None, :], b_Ai)


def test_a_row_used_twice_is_computed_where_its_first_use_reads_it():
    """The loaded row is computed where the broadcast against the carried tile reads it
    (its first use) and converted for the add after the column sums (its second), off
    the serial chain of the step: the add's wish had put the conversion, through shared
    memory, before the product (fla's KDA solve 10% slower). One warp: no conversion
    through shared memory in the loop at all."""
    sig = {"a_ptr": "*fp32", "d_ptr": "*fp32", "out_ptr": "*fp32", "T": "i32", "BC": "constexpr"}
    BC = 16
    kernel = tir_opt(forward_substitution_of_loaded_rows, sig, {"BC": BC},
                     attrs={"a_ptr": 16, "d_ptr": 16, "out_ptr": 16})
    for num_warps in (1, 4):
        tgir = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 1}, 90)[0]["tgir"]
        body = _loop_text(tgir)
        product = body.index(" = mul ")
        assert "smem(" not in body[:product], body
        if num_warps == 1:
            assert "smem(" not in body, body
        rng = np.random.default_rng(num_warps)
        a, d = (rng.uniform(-0.5, 0.5, (BC, BC)).astype(np.float32) for _ in range(2))
        for T in (BC, 11):
            out = np.full((BC, BC), np.nan, np.float32)
            EmulatedKernel(kernel, num_warps, capability=90, num_stages=1).run((1, 1, 1), [a, d, out, T])
            want = -np.tril(d.astype(np.float64), -1)
            for i in range(2, min(BC, T)):
                row = -a[i].astype(np.float64)
                row[i:] = 0.0
                want[i] = row + row @ want
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@tegula.jit
def corrected_state_updates(w_ptr, k_ptr, v_ptr, vnew_ptr, hs_ptr, T, BT: tl.constexpr, K: tl.constexpr,
                            V: tl.constexpr):
    """fla's gated-delta-rule state loop (`chunk_gated_delta_rule_fwd_kernel_h`): each
    step stores the carried f32 state as f16, corrects v by a dot with it, stores the
    corrected v and adds kᵀ·v to the state."""
    rt, rk, rv = tl.arange(0, BT), tl.arange(0, K), tl.arange(0, V)
    b_h = tl.zeros([K, V], dtype=tl.float32)
    for i in range(tl.cdiv(T, BT)):
        o_t = i * BT + rt
        m_t = o_t < T
        tl.store(hs_ptr + i * K * V + rk[:, None] * V + rv[None, :], b_h.to(tl.float16))
        b_w = tl.load(w_ptr + o_t[:, None] * K + rk[None, :], mask=m_t[:, None], other=0.0)
        b_v = tl.load(v_ptr + o_t[:, None] * V + rv[None, :], mask=m_t[:, None], other=0.0)
        b_v = b_v.to(tl.float32) - tl.dot(b_w, b_h.to(tl.float16))
        tl.store(vnew_ptr + o_t[:, None] * V + rv[None, :], b_v.to(tl.float16), mask=m_t[:, None])
        b_k = tl.load(k_ptr + rk[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)
        b_h = b_h * 0.5 + tl.dot(b_k, b_v.to(tl.float16))


def test_dot_results_are_stored_from_the_accumulator_layout():
    """The arithmetic between a dot and a store stays in the accumulator's layout and the
    store converts the narrow (f16) result: before, the stores' coalesced layout pulled
    the subtraction there, and the f32 dot result and the f32 state moved through
    shared memory every step."""
    sig = {"w_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "vnew_ptr": "*fp16", "hs_ptr": "*fp16",
           "T": "i32", "BT": "constexpr", "K": "constexpr", "V": "constexpr"}
    BT, K, V = 16, 32, 32
    kernel = tir_opt(corrected_state_updates, sig, {"BT": BT, "K": K, "V": V},
                     attrs={p: 16 for p in ("w_ptr", "k_ptr", "v_ptr", "vnew_ptr", "hs_ptr")})
    for capability, num_warps in ((80, 4), (90, 4), (80, 1)):
        asm = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 2}, capability)[0]
        moved = [ln for ln in _loop_text(asm["tgir"]).splitlines() if "convert_layout" in ln and "smem(" in ln]
        assert moved and not [ln for ln in moved if "xf32," in ln], moved
        if capability == 90:  # v's ring slot read into the accumulator's layout (wgmma itself reads none)
            assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in asm["ptx"]
            # the bf16 state and v converted for their stores are written by stmatrix
            assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in asm["ptx"]
            if find_ptxas() is not None:
                assert asm.get("cubin")
        rng = np.random.default_rng(capability + num_warps)
        for T in (3 * BT, 2 * BT + 5):
            nt = -(-T // BT)
            w, k, v = (rng.integers(-2, 3, (T, n)).astype(np.float16) for n in (K, K, V))
            vnew, hs = np.full((T, V), np.nan, np.float16), np.full((nt, K, V), np.nan, np.float16)
            EmulatedKernel(kernel, num_warps, capability=capability, num_stages=2).run(
                (1, 1, 1), [w, k, v, vnew, hs, T])
            h = np.zeros((K, V))
            for i in range(nt):
                rows = slice(i * BT, min(T, (i + 1) * BT))
                h16 = h.astype(np.float16).astype(np.float64)
                np.testing.assert_array_equal(hs[i], h16)
                vn = v[rows].astype(np.float64) - w[rows].astype(np.float64) @ h16
                np.testing.assert_array_equal(vnew[rows], vn.astype(np.float16))
                h = h * 0.5 + k[rows].T.astype(np.float64) @ vn.astype(np.float16).astype(np.float64)


@tegula.jit
def wy_backward_step(a_ptr, v_ptr, du_ptr, beta_ptr, dv_ptr, da_ptr, db_ptr, NV, BT: tl.constexpr,
                     BV: tl.constexpr):
    """fla's `prepare_wy_repr_bwd_kernel` (delta rule), its first loop: beta, loaded
    before the loop, scales v (read back from a ring) and a dot's result."""
    o_t, o_v = tl.arange(0, BT), tl.arange(0, BV)
    b_beta = tl.load(beta_ptr + o_t)
    b_A = tl.load(a_ptr + o_t[:, None] * BT + o_t[None, :])
    b_dbeta = tl.zeros([BT], dtype=tl.float32)
    b_dA = tl.zeros([BT, BT], dtype=tl.float32)
    for i_v in range(NV):
        offs = o_t[:, None] * (NV * BV) + i_v * BV + o_v[None, :]
        b_v = tl.load(v_ptr + offs)
        b_v_beta = (b_v * b_beta[:, None]).to(b_v.dtype)
        b_du = tl.load(du_ptr + offs)
        b_dA += tl.dot(b_du, tl.trans(b_v_beta))
        b_dv_beta = tl.dot(b_A, b_du)
        b_dbeta += tl.sum(b_dv_beta * b_v, 1)
        tl.store(dv_ptr + offs, (b_dv_beta * b_beta[:, None]).to(tl.float16))
    tl.store(da_ptr + o_t[:, None] * BT + o_t[None, :], b_dA)
    tl.store(db_ptr + o_t, b_dbeta)


def test_loop_invariant_operands_are_converted_before_the_loop():
    """beta is wanted in two layouts in the loop (v's and the accumulator's): its column
    is converted before the loop and broadcast there, where the broadcast tile was
    converted through shared memory every iteration."""
    sig = {"a_ptr": "*fp16", "v_ptr": "*fp16", "du_ptr": "*fp16", "beta_ptr": "*fp16", "dv_ptr": "*fp16",
           "da_ptr": "*fp32", "db_ptr": "*fp32", "NV": "i32", "BT": "constexpr", "BV": "constexpr"}
    BT, BV, NV = 32, 32, 3
    kernel = tir_opt(wy_backward_step, sig, {"BT": BT, "BV": BV},
                     attrs={p: 16 for p in ("a_ptr", "v_ptr", "du_ptr", "beta_ptr", "dv_ptr", "da_ptr", "db_ptr")})
    for capability, num_warps in ((80, 2), (80, 4), (90, 4)):
        tgir = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 2}, capability)[0]["tgir"]
        body = _loop_text(tgir)
        defined_in_loop = set(re.findall(r"(%\d+)(?:, %\d+)* = ", body)) | set(re.findall(r"%\d+", body.split("\n")[0]))
        converted = re.findall(r"= convert_layout (%\d+)", body)
        assert all(v in defined_in_loop for v in converted), (converted, body)
        rng = np.random.default_rng(capability + num_warps)
        a, beta = (rng.integers(-2, 3, n).astype(np.float16) for n in ((BT, BT), BT))
        v, du = (rng.integers(-2, 3, (BT, NV * BV)).astype(np.float16) for _ in range(2))
        dv, da, db = np.full((BT, NV * BV), np.nan, np.float16), np.full((BT, BT), np.nan, np.float32), \
            np.full(BT, np.nan, np.float32)
        EmulatedKernel(kernel, num_warps, capability=capability, num_stages=2).run(
            (1, 1, 1), [a, v, du, beta, dv, da, db, NV])
        a64, v64, du64, b64 = (x.astype(np.float64) for x in (a, v, du, beta))
        dvb = a64 @ du64
        np.testing.assert_array_equal(dv, (dvb * b64[:, None]).astype(np.float16))
        np.testing.assert_array_equal(da, du64 @ (v64 * b64[:, None]).T)
        np.testing.assert_array_equal(db, (dvb * v64).sum(1))


@tegula.jit
def gated_state_updates(w_ptr, k_ptr, v_ptr, g_ptr, vnew_ptr, h_ptr, T, BT: tl.constexpr, K: tl.constexpr,
                        V: tl.constexpr):
    """fla's gated state loop: the corrected values are scaled by a per-row gate
    `where(m, exp2(g_last - g), 0)` broadcast along the row before kᵀ·v."""
    rt, rk, rv = tl.arange(0, BT), tl.arange(0, K), tl.arange(0, V)
    b_h = tl.zeros([K, V], dtype=tl.float32)
    for i in range(tl.cdiv(T, BT)):
        o_t = i * BT + rt
        m_t = o_t < T
        b_w = tl.load(w_ptr + o_t[:, None] * K + rk[None, :], mask=m_t[:, None], other=0.0)
        b_v = tl.load(v_ptr + o_t[:, None] * V + rv[None, :], mask=m_t[:, None], other=0.0)
        b_v = b_v.to(tl.float32) - tl.dot(b_w, b_h.to(tl.float16))
        tl.store(vnew_ptr + o_t[:, None] * V + rv[None, :], b_v.to(tl.float16), mask=m_t[:, None])
        g_last = tl.load(g_ptr + tl.minimum((i + 1) * BT, T) - 1)
        b_g = tl.load(g_ptr + o_t, mask=m_t, other=0.0)
        b_v = b_v * tl.where(m_t, tl.exp2(g_last - b_g), 0)[:, None]
        b_k = tl.load(k_ptr + rk[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)
        b_h = b_h * tl.exp2(g_last) + tl.dot(b_k, b_v.to(tl.float16))
    tl.store(h_ptr + rk[:, None] * V + rv[None, :], b_h)


def test_a_row_gate_is_computed_in_the_accumulators_row_layout():
    """The gate's exp2 (its ring slot read back) is computed in the accumulator's row
    slice, where the broadcast meets the accumulator: before, the refinement round gave
    the exp2 its first-walk layout before the broadcast's wish reached it, and the gate
    went through shared memory (a conversion and a barrier) every iteration."""
    sig = {"w_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "g_ptr": "*fp32", "vnew_ptr": "*fp16",
           "h_ptr": "*fp32", "T": "i32", "BT": "constexpr", "K": "constexpr", "V": "constexpr"}
    BT, K, V = 16, 32, 32
    kernel = tir_opt(gated_state_updates, sig, {"BT": BT, "K": K, "V": V},
                     attrs={p: 16 for p in ("w_ptr", "k_ptr", "v_ptr", "g_ptr", "vnew_ptr", "h_ptr")})
    for capability, num_warps in ((80, 4), (90, 4)):
        tgir = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 2}, capability)[0]["tgir"]
        moved = [ln for ln in _loop_text(tgir).splitlines() if "convert_layout" in ln and "smem(" in ln]
        assert not [ln for ln in moved if re.search(r"tile<\d+xf32", ln)], moved
        rng = np.random.default_rng(capability + num_warps)
        T = 2 * BT + 5
        w, k, v = (rng.integers(-2, 3, (T, n)).astype(np.float16) for n in (K, K, V))
        g = -np.cumsum(rng.uniform(0.0, 0.5, T)).astype(np.float32)
        vnew, h = np.full((T, V), np.nan, np.float16), np.full((K, V), np.nan, np.float32)
        EmulatedKernel(kernel, num_warps, capability=capability, num_stages=2).run((1, 1, 1), [w, k, v, g, vnew, h, T])
        hh = np.zeros((K, V))
        for i in range(-(-T // BT)):
            rows = slice(i * BT, min(T, (i + 1) * BT))
            vn = v[rows].astype(np.float64) - w[rows].astype(np.float64) @ hh.astype(np.float16).astype(np.float64)
            np.testing.assert_allclose(vnew[rows], vn.astype(np.float16), rtol=2e-3, atol=2e-3)
            g_last = float(g[rows][-1])
            gated = (vn * np.exp2(g_last - g[rows].astype(np.float64))[:, None]).astype(np.float16)
            hh = hh * np.exp2(g_last) + k[rows].T.astype(np.float64) @ gated.astype(np.float64)
        np.testing.assert_allclose(h, hh, rtol=2e-2, atol=2e-2)


@tegula.jit
def gated_chunk_output(q_ptr, k_ptr, h_ptr, v_ptr, g_ptr, o_ptr, T, BT: tl.constexpr, K: tl.constexpr,
                       BK: tl.constexpr, V: tl.constexpr):
    """fla's chunk_fwd_kernel_o: q·h and q·kᵀ over K blocks, then a gate loaded after
    the loop scales the rows of one (`exp2(g)[:, None]`) and both axes of the other
    (`exp2(g[:, None] - g[None, :])`)."""
    rt, rk, rv = tl.arange(0, BT), tl.arange(0, BK), tl.arange(0, V)
    m_t = rt < T
    b_o = tl.zeros([BT, V], dtype=tl.float32)
    b_a = tl.zeros([BT, BT], dtype=tl.float32)
    for i in range(K // BK):
        o_k = i * BK + rk
        b_q = tl.load(q_ptr + rt[:, None] * K + o_k[None, :], mask=m_t[:, None], other=0.0)
        b_k = tl.load(k_ptr + o_k[:, None] + rt[None, :] * K, mask=m_t[None, :], other=0.0)
        b_h = tl.load(h_ptr + o_k[:, None] * V + rv[None, :])
        b_o += tl.dot(b_q, b_h)
        b_a += tl.dot(b_q, b_k)
    b_g = tl.load(g_ptr + rt, mask=m_t, other=0.0)
    b_o = b_o * tl.exp2(b_g)[:, None]
    b_a = b_a * tl.exp2(b_g[:, None] - b_g[None, :])
    b_a = tl.where((rt[:, None] >= rt[None, :]) & m_t[:, None] & m_t[None, :], b_a, 0.0)
    b_v = tl.load(v_ptr + rt[:, None] * V + rv[None, :], mask=m_t[:, None], other=0.0)
    b_o = b_o + tl.dot(b_a.to(tl.float16), b_v)
    tl.store(o_ptr + rt[:, None] * V + rv[None, :], b_o.to(tl.float16), mask=m_t[:, None])


def test_a_small_load_after_the_loop_is_not_replicated_into_a_slice():
    """The gate loaded once after the loop is not loaded replicated in the wgmma
    accumulator's column slice (it is loaded in the row slice, 2 values a thread, and
    converted to the column slice): that held 16 values and their 64-bit addresses a thread for the
    rest of the kernel (fla's chunk_fwd_kernel_o, 122 → 144 registers on sm_90a, a CTA
    fewer per SM and 15% slower). Inside a loop the replicated load stays (see
    `row_sums_of_products`: no conversion through shared memory in the loop)."""
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "h_ptr": "*fp16", "v_ptr": "*fp16", "g_ptr": "*fp32",
           "o_ptr": "*fp16", "T": "i32", "BT": "constexpr", "K": "constexpr", "BK": "constexpr", "V": "constexpr"}
    BT, K, BK, V = 64, 64, 32, 64
    kernel = tir_opt(gated_chunk_output, sig, {"BT": BT, "K": K, "BK": BK, "V": V},
                     attrs={p: 16 for p in ("q_ptr", "k_ptr", "h_ptr", "v_ptr", "g_ptr", "o_ptr")})
    for capability in (80, 90):
        asm = compile_kernel(kernel, {"num_warps": 4, "num_stages": 2}, capability)[0]
        # the column slice holds 16 values a thread on sm_90 (wgmma), 4 on sm_80: a few
        # replicated values (`_FEW_REPLICATED_REGISTERS`) are loaded where they are used
        scalar_f32_loads = re.findall(r"ld\.global(?:\.nc)?\.(?:b32|f32)\s", asm["ptx"])
        assert len(scalar_f32_loads) <= 4, (capability, len(scalar_f32_loads))
        rng = np.random.default_rng(capability)
        T = BT - 7
        q, k = (rng.integers(-2, 3, (BT, K)).astype(np.float16) for _ in range(2))
        h, v = rng.integers(-2, 3, (K, V)).astype(np.float16), rng.integers(-2, 3, (BT, V)).astype(np.float16)
        g = -np.cumsum(rng.uniform(0.0, 0.25, BT)).astype(np.float32)
        o = np.full((BT, V), np.nan, np.float16)
        EmulatedKernel(kernel, 4, capability=capability, num_stages=2).run((1, 1, 1), [q, k, h, v, g, o, T])
        q64, k64, g64 = q[:T].astype(np.float64), k[:T].astype(np.float64), g[:T].astype(np.float64)
        a = np.tril(q64 @ k64.T * np.exp2(g64[:, None] - g64[None, :]))
        want = (q64 @ h.astype(np.float64)) * np.exp2(g64)[:, None]
        want += a.astype(np.float16).astype(np.float64) @ v[:T].astype(np.float64)
        np.testing.assert_allclose(o[:T], want.astype(np.float16), rtol=2e-3, atol=2e-2)
        assert np.isnan(o[T:]).all()


@tegula.jit
def chunk_column_cumsum(s_ptr, o_ptr, T, H: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BS: tl.constexpr):
    """fla's chunk_local_cumsum_vector: each program scans a [BT, BS] chunk of a
    [T, H, S] tensor down its columns (rows T and beyond masked)."""
    i_s, i_t, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_t = i_t * BT + tl.arange(0, BT)
    o_s = i_s * BS + tl.arange(0, BS)
    m_s = (o_t[:, None] < T) & (o_s[None, :] < S)
    offs = i_h * S + o_t[:, None] * (H * S) + o_s[None, :]
    b_s = tl.load(s_ptr + offs, mask=m_s, other=0.0).to(tl.float32)
    b_o = tl.cumsum(b_s, axis=0)
    tl.store(o_ptr + offs, b_o.to(o_ptr.dtype.element_ty), mask=m_s)


def test_a_tile_of_column_scans_is_loaded_scanned_and_stored_in_one_layout():
    """A [64, 64] tile scanned down its columns: each thread scans one column in its
    registers, the load and the store are done in that layout (a warp's access 32
    consecutive values of a row: whole sectors), so no shuffle and no conversion
    through shared memory (the scan had lanes along the axis: 384 shuffles, and the
    tile went through shared memory before and after it). With more warps than a row
    has 32-lane groups the warps split the axis: one exchange of column totals."""
    sig = {"s_ptr": "*fp32", "o_ptr": "*fp32", "T": "i32", "H": "constexpr", "S": "constexpr", "BT": "constexpr",
           "BS": "constexpr"}
    H, S, BT, BS = 2, 128, 64, 64
    kernel = tir_opt(chunk_column_cumsum, sig, {"H": H, "S": S, "BT": BT, "BS": BS},
                     attrs={"s_ptr": 16, "o_ptr": 16})
    T = 2 * BT - 5
    for num_warps, barriers in ((2, 0), (4, 1)):
        asm = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 1}, 90)[0]
        assert "shfl.sync.up" not in asm["ptx"]
        assert len(re.findall(r"\bbar\.sync\b", asm["ptx"])) == barriers, num_warps
        rng = np.random.default_rng(num_warps)
        s = rng.integers(-4, 5, (T, H, S)).astype(np.float32)
        o = np.full((T, H, S), np.nan, np.float32)
        EmulatedKernel(kernel, num_warps, capability=90).run((S // BS, 2, H), [s, o, T])
        want = np.concatenate([np.cumsum(s[:BT], axis=0), np.cumsum(s[BT:], axis=0)])
        np.testing.assert_array_equal(o, want)


@tegula.jit
def welford_row_stats(x_ptr, mean_ptr, var_ptr, rows, N, BLOCK: tl.constexpr):
    """Inductor's looped layer norm statistics: a Welford mean, M2 and weight carried per
    element of a [1, BLOCK] row block, the weight updated from itself and the mask alone."""
    row = tl.program_id(0) + tl.arange(0, 1)[:, None]
    row_inside = row < rows
    mean = tl.zeros((1, BLOCK), tl.float32)
    m2 = tl.zeros((1, BLOCK), tl.float32)
    weight = tl.zeros((1, BLOCK), tl.float32)
    cols0 = tl.arange(0, BLOCK)[None, :]
    for start in range(0, N, BLOCK):
        cols = start + cols0
        inside = (cols < N) & row_inside
        x = tl.load(x_ptr + row * N + cols, inside, other=0.0).to(tl.float32)
        weight_next = weight + 1.0
        delta = x - mean
        mean_next = mean + delta / weight_next
        m2_next = m2 + delta * (x - mean_next)
        mean = tl.where(inside, mean_next, mean)
        m2 = tl.where(inside, m2_next, m2)
        weight = tl.where(inside, weight_next, weight)
    n = tl.sum(weight, 1)[:, None]
    mu = tl.sum(mean * weight, 1)[:, None] / n
    tl.store(mean_ptr + row, mu, row_inside)
    tl.store(var_ptr + row, tl.sum(m2 + weight * (mean - mu) * (mean - mu), 1)[:, None] / n, row_inside)


def test_a_welford_weight_takes_the_layout_of_the_loads_it_meets():
    # the weight's update reads only itself and the mask: it gave the weight its own
    # first-walk layout (the default, one element a thread) while the 16-byte loads
    # made the mean's 8 a thread, and `delta / weight` converted through shared memory
    # every iteration
    sig = {"x_ptr": "*fp16", "mean_ptr": "*fp32", "var_ptr": "*fp32", "rows": "i32", "N": "i32",
           "BLOCK": "constexpr"}
    kernel = tir_opt(welford_row_stats, sig, {"BLOCK": 1024},
                     attrs={"x_ptr": 16, "mean_ptr": 16, "var_ptr": 16, "N": 16})
    rows, N = 3, 1040
    rng = np.random.default_rng()
    x = rng.standard_normal((rows, N)).astype(np.float16)
    for capability in (80, 90):
        _assert_loop_converts_nothing_through_shared(kernel, capability)
        mean, var = np.zeros(rows, np.float32), np.zeros(rows, np.float32)
        EmulatedKernel(kernel, 4, capability=capability, num_stages=1).run((rows, 1, 1), [x, mean, var, rows, N])
        np.testing.assert_allclose(mean, x.astype(np.float64).mean(1), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(var, x.astype(np.float64).var(1), rtol=1e-4, atol=1e-5)
