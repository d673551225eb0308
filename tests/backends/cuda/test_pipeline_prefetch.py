"""Pipelining of dot-free loops that ask for it: `tl.range(..., num_stages=S)` in a
loop without a dot prefetches the loop's loads S-1 iterations ahead through cp.async
rings (Triton's tutorial 02, a persistent softmax). Checked on the emulator at
capability 80 and 90 against numpy, with row lengths and row counts that are not
multiples of the block or of the programs; loops that must not be rewritten are left
alone."""
from __future__ import annotations

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
def persistent_softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                       STAGES: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=mask)


SIG = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32", "n_rows": "i32",
       "n_cols": "i32", "BLOCK": "constexpr", "STAGES": "constexpr"}
ALIGNED = {"out_ptr": 16, "in_ptr": 16, "in_stride": 16, "out_stride": 16}


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("stages", [2, 4])
def test_persistent_softmax_prefetches_its_rows(capability, stages):
    kernel = tir_opt(persistent_softmax, SIG, {"BLOCK": 128, "STAGES": stages}, attrs=ALIGNED)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    lowered = ops(ek.lowering.kernel)
    assert lowered.count(Op.LOCAL_ALLOC) == 1 and Op.ASYNC_COPY in lowered and Op.ASYNC_WAIT in lowered
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    assert Op.LOAD not in [i.op for i in loop.regions[0].instrs]
    rows, cols = 37, 112  # 112 < BLOCK: the masked tail reads -inf, as the load's `other` says
    x = np.random.default_rng(stages + capability).standard_normal((rows, 128)).astype(np.float32)
    y = np.full((rows, 128), np.nan, np.float32)
    ek.run((5, 1, 1), [y, x, 128, 128, rows, cols])
    np.testing.assert_allclose(y[:, :cols], _softmax(x[:, :cols]), rtol=1e-5, atol=1e-6)
    assert np.isnan(y[:, cols:]).all()


def test_loops_without_their_own_num_stages_are_left_alone():
    @tegula.jit
    def plain(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
        for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
            cols = tl.arange(0, BLOCK)
            x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=0.0)
            tl.store(out_ptr + row * out_stride + cols, x * 2, mask=cols < n_cols)

    sig = {k: v for k, v in SIG.items() if k != "STAGES"}
    ek = EmulatedKernel(tir_opt(plain, sig, {"BLOCK": 128}, attrs=ALIGNED), 4, capability=90, num_stages=3)
    assert Op.ASYNC_COPY not in ops(ek.lowering.kernel)


def test_a_loop_storing_where_it_loads_is_left_alone():
    """Each iteration reads what the previous one wrote (a running prefix over rows):
    loads issued iterations early would miss those writes."""

    @tegula.jit
    def carry_rows(buf_ptr, stride, n_rows, BLOCK: tl.constexpr, STAGES: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        for row in tl.range(1, n_rows, num_stages=STAGES):
            prev = tl.load(buf_ptr + (row - 1) * stride + cols)
            cur = tl.load(buf_ptr + row * stride + cols)
            tl.store(buf_ptr + row * stride + cols, prev + cur)

    sig = {"buf_ptr": "*fp32", "stride": "i32", "n_rows": "i32", "BLOCK": "constexpr", "STAGES": "constexpr"}
    kernel = tir_opt(carry_rows, sig, {"BLOCK": 64, "STAGES": 3}, attrs={"buf_ptr": 16, "stride": 16})
    ek = EmulatedKernel(kernel, 2, capability=90, num_stages=3)
    assert Op.ASYNC_COPY not in ops(ek.lowering.kernel)
    x = np.random.default_rng(5).standard_normal((9, 64)).astype(np.float32)
    buf = x.copy()
    ek.run((1, 1, 1), [buf, 64, 9])
    np.testing.assert_allclose(buf, np.cumsum(x.astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)


def test_loads_too_narrow_for_cp_async_are_not_prefetched():
    """Nothing known about the alignment of 2-byte elements: each copy would move 2
    bytes, below cp.async's 4, so the load stays a load."""

    @tegula.jit
    def halves(out_ptr, in_ptr, in_stride, n_rows, BLOCK: tl.constexpr, STAGES: tl.constexpr):
        for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
            cols = tl.arange(0, BLOCK)
            x = tl.load(in_ptr + row * in_stride + cols)
            tl.store(out_ptr + row * BLOCK + cols, x.to(tl.float32))

    sig = {"out_ptr": "*fp32", "in_ptr": "*fp16", "in_stride": "i32", "n_rows": "i32", "BLOCK": "constexpr",
           "STAGES": "constexpr"}
    ek = EmulatedKernel(tir_opt(halves, sig, {"BLOCK": 64, "STAGES": 3}), 2, capability=90, num_stages=3)
    assert Op.ASYNC_COPY not in ops(ek.lowering.kernel)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("capability", [80, 90])
def test_prefetch_ptx_assembles_with_16_byte_copies(capability):
    # n_cols divisible by 16 too: the mask is constant over 16-byte runs
    kernel = tir_opt(persistent_softmax, SIG, {"BLOCK": 1024, "STAGES": 3}, attrs=dict(ALIGNED, n_cols=16))
    asm, md = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, capability)
    ptx = asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 1" in ptx
    assert "ld.global" not in ptx and "fence.proxy.async" not in ptx
    assert md["shared"] >= 3 * 1024 * 4 and "cubin" in asm


@tegula.jit
def scaled_blocks(a_ptr, v_ptr, beta_ptr, u_ptr, T, BT: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    """fla's recompute_w_u: u = A @ (v * beta) in blocks of BV columns, where no dot reads
    a load as it is (A loaded before the loop, each block of v scaled before it is B)."""
    rt, rv = tl.arange(0, BT), tl.arange(0, BV)
    m_t = rt < T
    a = tl.load(a_ptr + rt[:, None] * BT + rt[None, :])
    beta = tl.load(beta_ptr + rt, mask=m_t, other=0.0)
    for i in range(tl.cdiv(V, BV)):
        o_v = i * BV + rv
        v = tl.load(v_ptr + rt[:, None] * V + o_v[None, :], mask=m_t[:, None], other=0.0)
        u = tl.dot(a, (v * beta[:, None]).to(tl.float16))
        tl.store(u_ptr + rt[:, None] * V + o_v[None, :], u, mask=m_t[:, None])


@pytest.mark.parametrize("capability", [80, 90])
def test_a_dot_loop_whose_loads_are_scaled_first_is_pipelined(capability):
    """Its loads come through a ring S-1 iterations ahead and are read back into
    registers (Triton pipelines this loop; unpipelined, each block's load latency was
    exposed before its scale and its dot)."""
    BT, V, BV, T = 64, 192, 64, 53
    sig = {"a_ptr": "*fp16", "v_ptr": "*fp16", "beta_ptr": "*fp32", "u_ptr": "*fp32", "T": "i32",
           "BT": "constexpr", "V": "constexpr", "BV": "constexpr"}
    kernel = tir_opt(scaled_blocks, sig, {"BT": BT, "V": V, "BV": BV},
                     attrs={"a_ptr": 16, "v_ptr": 16, "beta_ptr": 16, "u_ptr": 16})
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    assert Op.ASYNC_COPY in ops(loop)
    rng = np.random.default_rng(capability)
    a = rng.integers(-2, 3, (BT, BT)).astype(np.float16)
    v = rng.integers(-2, 3, (BT, V)).astype(np.float16)
    beta = rng.integers(-2, 3, BT).astype(np.float32)
    u = np.full((BT, V), np.nan, np.float32)
    ek.run((1, 1, 1), [a, v, beta, u, T])
    want = a.astype(np.float64)[:T, :T] @ (v[:T].astype(np.float64) * beta[:T, None])
    np.testing.assert_array_equal(u[:T], want)
    assert np.isnan(u[T:]).all()
