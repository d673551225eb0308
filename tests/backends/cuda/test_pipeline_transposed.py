"""Pipelining a load that reaches its dot through a transpose (`b.T`, `tl.trans`): the
tile an [N, K] block holds, read as a K-major B, as Triton's tensor-descriptor matmul
(`b_desc.load([n, k]).T`, tutorial 09) and attention's `K^T` write it. The pipeliner
transposes the copy's addresses instead, so the slot holds the dot's operand; on sm_90a
the dot then runs on wgmma reading that slot as a K-major B. Checked on the emulator
at capability 80 and 90 against float64 numpy, with sizes not multiples of the block."""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_pipeline_loops import ops, tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.ir.ops import Op


@tegula.jit
def matmul_bt(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              USE_DESC: tl.constexpr):
    """C = A @ Bt.T with Bt stored [N, K] row-major; through pointers or descriptors."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    if USE_DESC:
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
        b_desc = tl.make_tensor_descriptor(bt_ptr, [N, K], [K, 1], [BN, BK])
        for k in range(0, K, BK):
            a = a_desc.load([pm * BM, k])
            b = b_desc.load([pn * BN, k])
            acc = tl.dot(a, b.T, acc)
    else:
        for k in range(0, K, BK):
            rk = k + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(bt_ptr + rn[:, None] * K + rk[None, :], mask=(rn[:, None] < N) & (rk[None, :] < K),
                        other=0.0)
            acc = tl.dot(a, tl.trans(b), acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


SIG = {"a_ptr": "*fp16", "bt_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
       "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "USE_DESC": "constexpr"}


def _kernel(use_desc: bool, bm=64, bn=32, bk=32):
    # pointers 16-byte aligned; 120, 72, 104: all divisible by 8
    attrs = {n: 16 if t.startswith("*") else 8 for n, t in SIG.items() if t != "constexpr"}
    return tir_opt(matmul_bt, SIG, {"BM": bm, "BN": bn, "BK": bk, "USE_DESC": use_desc}, attrs=attrs)


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("use_desc", [False, True], ids=["pointers", "descriptors"])
def test_transposed_operand_is_pipelined_and_correct(capability, use_desc):
    kernel = _kernel(use_desc)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    lowered = ops(ek.lowering.kernel)
    # both operands go through rings; the transpose left the loop with the load. On
    # sm_90a descriptor loads are TMA copies, each ring with its mbarriers
    if use_desc and capability == 90:
        assert lowered.count(Op.LOCAL_ALLOC) == 4 and lowered.count(Op.TMA_LOAD) == 2 * 3  # prologue 2, loop 1
        assert Op.ASYNC_COPY not in lowered
    else:
        assert lowered.count(Op.LOCAL_ALLOC) == 2 and Op.ASYNC_COPY in lowered
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    assert Op.LOAD not in [i.op for i in loop.regions[0].instrs]
    assert [c.version for c in ek.plan.mma.values()] == [3 if capability == 90 else 2]
    M, N, K = 120, 72, 104
    rng = np.random.default_rng(capability + use_desc)
    a = rng.standard_normal((M, K)).astype(np.float16)
    bt = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    ek.run(((M + 63) // 64, (N + 31) // 32, 1), [a, bt, c, M, N, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ bt.astype(np.float64).T, rtol=2e-3, atol=2e-3)


def test_transpose_with_other_users_is_not_pipelined():
    """A loaded tile also read untransposed keeps its load (the slot would have to hold
    both orientations); the loop is still pipelined for the other operand."""

    @tegula.jit
    def twice(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        side = tl.zeros((BN, BK), dtype=tl.float32)
        for k in range(0, K, BK):
            rk = k + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
            b = tl.load(bt_ptr + rn[:, None] * K + rk[None, :])
            acc = tl.dot(a, tl.trans(b), acc)
            side += b.to(tl.float32)
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc + tl.sum(side, axis=1)[None, :])

    sig = {"a_ptr": "*fp16", "bt_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    attrs = {n: 16 for n in ("a_ptr", "bt_ptr", "c_ptr", "K")}
    kernel = tir_opt(twice, sig, {"BM": 64, "BN": 32, "BK": 32}, attrs=attrs)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    body = [i.op for i in loop.regions[0].instrs]
    assert body.count(Op.LOAD) == 1 and Op.ASYNC_COPY in body
    M, N, K = 64, 32, 96
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(np.float16)
    bt = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    ek.run((1, 1, 1), [a, bt, c, M, N, K])
    side = bt.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(c, a.astype(np.float64) @ bt.astype(np.float64).T + side[None, :], rtol=2e-3,
                               atol=2e-3)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("use_desc", [False, True], ids=["pointers", "descriptors"])
def test_transposed_operand_ptx_is_wgmma_with_a_k_major_b(use_desc):
    """16-byte cp.async for both operands (TMA copies for descriptors), wgmma with B read
    K-major (imm-trans-b 0)."""
    asm, md = compile_kernel(_kernel(use_desc, 128, 128, 64), {"num_warps": 4, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    if use_desc:
        assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
        assert "cp.async.c" not in ptx and "ld.global" not in ptx and len(md["tensormaps"]) == 2
    else:
        # K is specialized divisible by 8, not 16: rows start mid-sector, so the copies
        # go through L1 (`.ca`, copy_caching); 16 bytes each either way
        assert re.search(r"cp\.async\.c[ag]\.shared\.global \[[^]]+\], \[[^]]+\], 16[,;]", ptx)
        assert "ld.global" not in ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx and "p, 1, 1, 0, 0;" in ptx
    assert "cubin" in asm
