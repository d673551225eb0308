"""Attention-backward-shaped loops (Triton's tutorial 06 `_attn_bwd_dkdv`): a tile read
by dots both directly and transposed is pipelined as one ring read both ways on sm_90a
(`slot_views`) and as two rings on sm_80 (`pipeline_split.split_transposed_uses`), and
loop-invariant operands loaded before the loop are staged in shared memory on sm_90a
when registers are short (`stage_operands`). Checked against float64 on the emulator at capabilities 80 and 90
(integer-valued fp16 inputs: every dot is exact, every rounding to fp16 the same as
numpy's), on the interpreter before and after the passes, and with ptxas."""
from __future__ import annotations

import numpy as np
import pytest
from test_pipeline_loops import ops, tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.pipeline_loops import pipeline_loops
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.backends.cuda.stage_operands import stage_invariant_operands
from tegula.backends.interpreter import execute
from tegula.ir.clone import clone_kernel
from tegula.ir.ops import Op
from tegula.ir.verifier import verify


@tegula.jit
def dkdv(q_ptr, k_ptr, v_ptr, do_ptr, dk_ptr, dv_ptr, N, BN: tl.constexpr, BM: tl.constexpr, D: tl.constexpr):
    rn, rm, rd = tl.arange(0, BN), tl.arange(0, BM), tl.arange(0, D)
    k = tl.load(k_ptr + rn[:, None] * D + rd[None, :])
    v = tl.load(v_ptr + rn[:, None] * D + rd[None, :])
    dk = tl.zeros((BN, D), dtype=tl.float32)
    dv = tl.zeros((BN, D), dtype=tl.float32)
    qT_ptrs = q_ptr + rm[None, :] * D + rd[:, None]
    do_ptrs = do_ptr + rm[:, None] * D + rd[None, :]
    for _ in range(0, N, BM):
        qT = tl.load(qT_ptrs)
        pT = tl.dot(k, qT).to(tl.float16)
        do = tl.load(do_ptrs)
        dv += tl.dot(pT, do)
        dpT = tl.dot(v, tl.trans(do))
        dsT = (pT.to(tl.float32) * dpT).to(tl.float16)
        dk += tl.dot(dsT, tl.trans(qT))
        qT_ptrs += BM * D
        do_ptrs += BM * D
    tl.store(dk_ptr + rn[:, None] * D + rd[None, :], dk)
    tl.store(dv_ptr + rn[:, None] * D + rd[None, :], dv)


SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "do_ptr": "*fp16", "dk_ptr": "*fp32",
       "dv_ptr": "*fp32", "N": "i32", "BN": "constexpr", "BM": "constexpr", "D": "constexpr"}


def _kernel(bn=128, bm=32, d=64):
    attrs = {n: 16 for n, t in SIG.items() if t != "constexpr"}
    return tir_opt(dkdv, SIG, {"BN": bn, "BM": bm, "D": d}, attrs=attrs)


def _inputs(bn, d, n, seed):
    rng = np.random.default_rng(seed)
    q, do = (rng.integers(-1, 2, (n, d)).astype(np.float16) for _ in range(2))
    k, v = (rng.integers(-1, 2, (bn, d)).astype(np.float16) for _ in range(2))
    return q, k, v, do


def _reference(q, k, v, do, bm):
    f64 = np.float64
    dk = np.zeros((k.shape[0], k.shape[1]))
    dv = np.zeros_like(dk)
    for i in range(0, q.shape[0], bm):
        qT, dob = q[i:i + bm].T, do[i:i + bm]
        pT = (k.astype(f64) @ qT.astype(f64)).astype(np.float16)
        dv += pT.astype(f64) @ dob.astype(f64)
        dpT = (v.astype(f64) @ dob.astype(f64).T).astype(np.float32)
        dsT = (pT.astype(np.float32) * dpT).astype(np.float16)
        dk += dsT.astype(f64) @ qT.astype(f64).T
    return dk, dv


def _args(kernel, q, k, v, do, dk, dv):
    values = {"q_ptr": q, "k_ptr": k, "v_ptr": v, "do_ptr": do, "dk_ptr": dk, "dv_ptr": dv, "N": q.shape[0]}
    return [values[n] for n in kernel.arg_names]


def _check_on(ek, kernel, bm, inputs):
    """Run the emulated kernel on `inputs` (q, k, v, do) against the float64 reference."""
    q, k, v, do = inputs
    dk = np.full(k.shape, np.nan, np.float32)
    dv = np.full(k.shape, np.nan, np.float32)
    ek.run((1, 1, 1), _args(kernel, q, k, v, do, dk, dv))
    want_dk, want_dv = _reference(q, k, v, do, bm)
    np.testing.assert_allclose(dv, want_dv, rtol=1e-6)
    np.testing.assert_allclose(dk, want_dk, rtol=1e-6)


@pytest.mark.parametrize("capability", [80, 90])
def test_dkdv_on_the_emulator(capability):
    BN, BM, D, N = 128, 32, 64, 160
    kernel = _kernel(BN, BM, D)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    want_version = 3 if capability == 90 else 2
    assert [c.version for c in ek.plan.mma.values()] == [want_version] * 4
    lowered = ek.lowering.kernel
    rings = [i for i in lowered.walk() if i.op is Op.LOCAL_ALLOC and i.results[0].type.shape[0] == 3]
    staged = [i for i in lowered.walk() if i.op is Op.LOCAL_ALLOC and i.results[0].type.shape[0] == 1]
    # sm_90a: one ring each for qT and dO, read by wgmma directly and through a transposed
    # view (`slot_views`); sm_80: mma.sync reads slots as stored, so each is split in two
    assert len(rings) == (2 if capability == 90 else 4)
    assert len(staged) == (2 if capability == 90 else 0)   # K and V, beside dK and dV (4 warps)
    _check_on(ek, kernel, BM, _inputs(BN, D, N, capability))


def test_staged_copies_are_in_flight_together():
    """K and V, staged one after the other, are waited for right before the loop that
    reads them, not after each copy: both copies and the loop's prologue (two groups,
    3 stages) are then in flight together. K's wait leaves V's group and the prologue's
    in flight (3), V's the prologue's (2)."""
    BN, BM, D, N = 128, 32, 64, 160
    kernel = _kernel(BN, BM, D)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    top = ek.lowering.kernel.body.instrs
    commits = [i for i, ins in enumerate(top) if ins.op is Op.ASYNC_COMMIT]
    waits = [i for i, ins in enumerate(top) if ins.op is Op.ASYNC_WAIT]
    loop = next(i for i, ins in enumerate(top) if ins.op is Op.FOR)
    assert len(commits) == 4 and commits[-1] < waits[0] < waits[1] < loop
    assert [top[i].attrs.pending for i in waits[:2]] == [3, 2]
    _check_on(ek, kernel, BM, _inputs(BN, D, N, 11))


def test_passes_keep_the_interpreters_results():
    """Translation validation: the interpreter gives the same bits before and after
    splitting, pipelining and staging."""
    BN, BM, D, N = 64, 16, 32, 80
    before = _kernel(BN, BM, D)
    after = clone_kernel(before)
    assert pipeline_loops(after, 3, 4, 90) == 1
    assert stage_invariant_operands(after, 4, 90) == 0   # 32 + 32 registers of dK, dV: K, V stay
    verify(after, stage="tgir")
    q, k, v, do = _inputs(BN, D, N, 5)
    outs = []
    for kern in (before, after):
        dk, dv = np.zeros((BN, D), np.float32), np.zeros((BN, D), np.float32)
        execute(kern, (1, 1, 1), _args(kern, q, k, v, do, dk, dv))
        outs.append((dk, dv))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


@tegula.jit
def transposed_pointer_used_after(q_ptr, k_ptr, o_ptr, N, BN: tl.constexpr, BM: tl.constexpr, D: tl.constexpr):
    """The pointer the split load reads is used after the loop: nothing is pipelined,
    and the loop keeps a single load of Q^T."""
    rn, rm, rd = tl.arange(0, BN), tl.arange(0, BM), tl.arange(0, D)
    k = tl.load(k_ptr + rn[:, None] * D + rd[None, :])
    acc = tl.zeros((BN, D), dtype=tl.float32)
    qT_ptrs = q_ptr + rm[None, :] * D + rd[:, None]
    for _ in range(0, N, BM):
        qT = tl.load(qT_ptrs)
        pT = tl.dot(k, qT).to(tl.float16)
        acc += tl.dot(pT, tl.trans(qT))
        qT_ptrs += BM * D
    tl.store(o_ptr + rn[:, None] * D + rd[None, :], acc + tl.load(qT_ptrs - BM * D).to(tl.float32).sum())


@pytest.mark.parametrize("capability", [80, 90])
def test_a_loop_left_alone_keeps_one_load(capability):
    """sm_80 splits the load, then gives its copy back; sm_90a never splits it."""
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32", "BN": "constexpr", "BM": "constexpr",
           "D": "constexpr"}
    kernel = tir_opt(transposed_pointer_used_after, sig, {"BN": 64, "BM": 16, "D": 32},
                     attrs={n: 16 for n in ("q_ptr", "k_ptr", "o_ptr", "N")})
    loop = next(i for i in kernel.walk() if i.op is Op.FOR)
    loads_before = ops(loop).count(Op.LOAD)
    assert pipeline_loops(kernel, 3, 4, capability) == 0
    assert ops(loop).count(Op.LOAD) == loads_before == 1


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_dkdv_ptx_assembles_on_wgmma():
    asm, md = compile_kernel(_kernel(128, 32, 64), {"num_warps": 4, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    assert "mma.sync" not in ptx and ptx.count("wgmma.mma_async") >= 4 and "cubin" in asm
    assert "cp.async.cg.shared.global" in ptx


@tegula.jit
def both_ways(x_ptr, y_ptr, w_ptr, o1_ptr, o2_ptr, o3_ptr, N, BM: tl.constexpr, BK: tl.constexpr):
    """x ([BK, BM] blocks) read as B directly (w @ x), as A through its transpose
    (x^T @ y), and by one dot both ways (x^T @ x, which keeps the two-ring split)."""
    rm, rk = tl.arange(0, BM), tl.arange(0, BK)
    acc1 = tl.zeros((BM, BM), dtype=tl.float32)
    acc2 = tl.zeros((BM, BM), dtype=tl.float32)
    acc3 = tl.zeros((BM, BM), dtype=tl.float32)
    w = tl.load(w_ptr + rm[:, None] * BK + rk[None, :])
    for n in range(0, N, BK):
        x = tl.load(x_ptr + (n + rk)[:, None] * BM + rm[None, :])
        y = tl.load(y_ptr + (n + rk)[:, None] * BM + rm[None, :])
        acc1 = tl.dot(tl.trans(x), y, acc1)
        acc2 = tl.dot(w, x, acc2)
        acc3 = tl.dot(tl.trans(y), y, acc3)
    tl.store(o1_ptr + rm[:, None] * BM + rm[None, :], acc1)
    tl.store(o2_ptr + rm[:, None] * BM + rm[None, :], acc2)
    tl.store(o3_ptr + rm[:, None] * BM + rm[None, :], acc3)


@pytest.mark.parametrize("capability", [80, 90])
def test_a_slot_read_as_a_transposed_a_and_as_b(capability):
    BM, BK, N = 64, 32, 96
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "o1_ptr": "*fp32", "o2_ptr": "*fp32",
           "o3_ptr": "*fp32", "N": "i32", "BM": "constexpr", "BK": "constexpr"}
    kernel = tir_opt(both_ways, sig, {"BM": BM, "BK": BK}, attrs={n: 16 for n in sig if sig[n] != "constexpr"})
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    rings = [i for i in ek.lowering.kernel.walk() if i.op is Op.LOCAL_ALLOC and i.results[0].type.shape[0] == 3]
    # sm_90a: x one ring and y one ring, each read both ways (y by one dot, as A
    # through its transpose and as B); sm_80 splits both
    assert len(rings) == (2 if capability == 90 else 4)
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (N, BM)).astype(np.float16)
    y = rng.integers(-2, 3, (N, BM)).astype(np.float16)
    w = rng.integers(-2, 3, (BM, BK)).astype(np.float16)
    outs = [np.full((BM, BM), np.nan, np.float32) for _ in range(3)]
    values = {"x_ptr": x, "y_ptr": y, "w_ptr": w, "o1_ptr": outs[0], "o2_ptr": outs[1], "o3_ptr": outs[2], "N": N}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    f64 = np.float64
    want2 = sum(w.astype(f64) @ x[n:n + BK].astype(f64) for n in range(0, N, BK))
    np.testing.assert_array_equal(outs[0], x.astype(f64).T @ y.astype(f64))
    np.testing.assert_array_equal(outs[1], want2)
    np.testing.assert_array_equal(outs[2], y.astype(f64).T @ y.astype(f64))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_transposed_views_assemble():
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "o1_ptr": "*fp32", "o2_ptr": "*fp32",
           "o3_ptr": "*fp32", "N": "i32", "BM": "constexpr", "BK": "constexpr"}
    kernel = tir_opt(both_ways, sig, {"BM": 64, "BK": 32}, attrs={n: 16 for n in sig if sig[n] != "constexpr"})
    asm, _md = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, 90)
    assert "cubin" in asm and "mma.sync" not in asm["ptx"] and asm["ptx"].count("wgmma.mma_async") >= 3


@tegula.jit
def gram_of_rows(x_ptr, o_ptr, T, K, BT: tl.constexpr, BK: tl.constexpr):
    """fla's chunk_scaled_dot_kkt: x x^T of a [BT, K] row block, K in BK chunks (rows
    T and beyond masked), one dot reading the tile as A and through its transpose as B."""
    rt, rk = tl.arange(0, BT), tl.arange(0, BK)
    acc = tl.zeros((BT, BT), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptr + rt[:, None] * K + (k + rk)[None, :], mask=(rt < T)[:, None], other=0.0)
        acc += tl.dot(x, tl.trans(x))
    tl.store(o_ptr + rt[:, None] * BT + rt[None, :], acc)


@pytest.mark.parametrize("capability", [80, 90])
def test_a_tile_times_its_own_transpose_reads_one_ring(capability):
    """On wgmma the tile is one ring read twice in place, as A and as the transposed
    view's B (both K-major: fla's kkt had two rings of the same copies, twice the
    shared memory and copies); sm_80 splits it."""
    BT, BK, K, T = 64, 32, 96, 57
    sig = {"x_ptr": "*fp16", "o_ptr": "*fp32", "T": "i32", "K": "i32", "BT": "constexpr", "BK": "constexpr"}
    kernel = tir_opt(gram_of_rows, sig, {"BT": BT, "BK": BK}, attrs={"x_ptr": 16, "o_ptr": 16, "K": 16})
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    rings = [i for i in ek.lowering.kernel.walk() if i.op is Op.LOCAL_ALLOC and i.results[0].type.shape[0] == 3]
    assert len(rings) == (1 if capability == 90 else 2)
    x = np.random.default_rng(capability).integers(-2, 3, (BT, K)).astype(np.float16)
    out = np.full((BT, BT), np.nan, np.float32)
    ek.run((1, 1, 1), [x, out, T, K])
    rows = x.astype(np.float64) * (np.arange(BT) < T)[:, None]
    np.testing.assert_array_equal(out, rows @ rows.T)
