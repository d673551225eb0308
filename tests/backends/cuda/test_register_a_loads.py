"""Where a wgmma dot's A comes from on sm_90: a load outside the loop its dot sits in
(attention's Q, loaded before the KV loop) goes straight into the register-A fragment
layout (`layout_anchors.AnchorRules.register_a_loads`) — a conversion at the dot would go through
shared memory in every iteration — while the A of a lone dot (in the block its load is
in) is staged in a slot like its B (`stage_operands`) and read there in place by wgmma:
the threads copy it themselves (`through_registers`), with 16-byte `ld.global.v4` loads
as Triton's test_dot checks for, and store it into the slot; no conversion through
scratch. Results against float64 on the host emulator; the PTX assembles for sm_90a."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.compiler import ASTSource
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def lone_dot(x_ptr, y_ptr, z_ptr, sxm, syk, szm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    x = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :])
    y = tl.load(y_ptr + rk[:, None] * syk + rn[None, :])
    tl.store(z_ptr + rm[:, None] * szm + rn[None, :], tl.dot(x, y))


@tegula.jit
def q_times_blocks(q_ptr, k_ptr, o_ptr, n_blocks, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """Q [BM, D] loaded once, then Q @ K_j for each K_j [D, BN]; the products summed."""
    rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for j in range(n_blocks):
        kb = tl.load(k_ptr + j * D * BN + rd[:, None] * BN + rn[None, :])
        acc += tl.dot(q, kb)
    tl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def _lone_kernel(bm, bn, bk):
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "z_ptr": "*fp32", "sxm": "i32", "syk": "i32", "szm": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    return optimized_ir(ASTSource(lone_dot, signature=sig, constexprs={"BM": bm, "BN": bn, "BK": bk},
                                  attrs={n: 16 for n in ("x_ptr", "y_ptr", "z_ptr", "sxm", "syk", "szm")}))


def _q_kernel(bm, bn, d):
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp32", "n_blocks": "i32",
           "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
    return optimized_ir(ASTSource(q_times_blocks, signature=sig, constexprs={"BM": bm, "BN": bn, "D": d},
                                  attrs={"q_ptr": 16, "k_ptr": 16, "o_ptr": 16}))


def _anchor_of_a(ek):
    """(the A operand's producer, whether a conversion feeds the dot its A) in the lowered tgir."""
    kernel = ek.lowering.kernel
    dot = next(i for i in kernel.walk() if i.op is Op.DOT)
    a = dot.operands[0].owner
    converted = a.op is Op.CONVERT_LAYOUT
    return (a.operands[0].owner if converted else a), converted


@pytest.mark.parametrize("bm, bn, bk, warps", [(64, 64, 64, 4), (128, 128, 64, 8), (128, 64, 128, 4)])
def test_lone_dot_reads_a_from_a_slot(bm, bn, bk, warps):
    kernel = _lone_kernel(bm, bn, bk)
    ek = EmulatedKernel(kernel, warps, capability=90, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [3]
    a, converted = _anchor_of_a(ek)
    assert a.op is Op.LOCAL_LOAD and not converted
    copy = next(i for i in ek.lowering.kernel.walk() if i.op is Op.ASYNC_COPY and i.operands[0] is a.operands[0])
    assert copy.attrs.through_registers
    rng = np.random.default_rng(bm + bk)
    x = rng.standard_normal((bm, bk)).astype(np.float16)
    y = rng.standard_normal((bk, bn)).astype(np.float16)
    z = np.zeros((bm, bn), np.float32)
    ek.run((1, 1, 1), [x, y, z, bk, bn, bn])
    np.testing.assert_allclose(z, x.astype(np.float64) @ y.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_lone_dot_ptx_has_16_byte_loads():
    """Triton's test_dot asserts `ld.global.v4` (and `st.global.v4`) in a lone dot's PTX."""
    asm, _md = compile_kernel(_lone_kernel(64, 64, 64), {"num_warps": 4, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    assert "ld.global.v4" in ptx and "st.global.v4" in ptx and "wgmma.mma_async" in ptx and "cubin" in asm


@pytest.mark.parametrize("warps", [4, 8])
def test_loop_invariant_a_loads_into_the_fragments(warps):
    kernel = _q_kernel(64 * (warps // 4), 64, 64)
    ek = EmulatedKernel(kernel, warps, capability=90, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [3]
    load, converted = _anchor_of_a(ek)
    assert load.op is Op.LOAD and not converted  # no conversion inside the loop
    bm, n_blocks = 64 * (warps // 4), 3
    rng = np.random.default_rng(warps)
    q = rng.standard_normal((bm, 64)).astype(np.float16)
    k = rng.standard_normal((n_blocks, 64, 64)).astype(np.float16)
    o = np.zeros((bm, 64), np.float32)
    ek.run((1, 1, 1), [q, k, o, n_blocks])
    want = sum(q.astype(np.float64) @ k[j].astype(np.float64) for j in range(n_blocks))
    np.testing.assert_allclose(o, want, rtol=1e-4, atol=1e-4)


def test_lone_dot_copies_a_after_issuing_b():
    """A's copy through registers waits for its own loads before storing: issued first,
    it would hold B's cp.async back, and the two loads' latencies would add up."""
    kernel = _lone_kernel(128, 128, 64)
    ek = EmulatedKernel(kernel, 8, capability=90, num_stages=3)
    top = ek.lowering.kernel.body.instrs
    copies = [i for i in top if i.op is Op.ASYNC_COPY]
    assert [c.attrs.through_registers for c in copies] == [False, True]
    first_wait = next(k for k, i in enumerate(top) if i.op is Op.ASYNC_WAIT)
    assert top.index(copies[1]) < first_wait
