"""Scalar loads of a pipelined dot loop are prefetched with its tiles (`scalar_loads`):
a 4-byte cp.async per iteration, S-1 iterations ahead, as Triton's pipeliner does
(fla's gate at a chunk's last row was read with a plain load every iteration, its
latency exposed). Checked on the emulator at capability 80 and 90 against numpy, with
a trip count and a K that are not multiples of the block; a scalar too narrow for
cp.async and a scalar index that addresses the loop's tiles keep their old lowering."""
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
from tegula.ir.types import TileType


@tegula.jit
def decayed_state(a_ptr, b_ptr, g_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """acc <- acc * g[last row of the K block] + A_k @ B_k, over the K blocks."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        in_k = k + rk < K
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=in_k[None, :], other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :], mask=in_k[:, None], other=0.0)
        g_last = tl.load(g_ptr + tl.minimum(k + BK, K) - 1)
        acc = acc * g_last + tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "g_ptr": "*fp32", "c_ptr": "*fp32", "K": "i32",
       "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
BLOCKS = {"BM": 64, "BN": 64, "BK": 32}
ALIGNED = {"a_ptr": 16, "b_ptr": 16, "g_ptr": 16, "c_ptr": 16}


def _scalar_loads(block) -> list:
    return [i for i in block.instrs if i.op is Op.LOAD and not isinstance(i.results[0].type, TileType)]


def _want(a, b, g, K, BK):
    acc = np.zeros((a.shape[0], b.shape[1]))
    for k in range(0, K, BK):
        acc = acc * g[min(k + BK, K) - 1] + a[:, k:k + BK].astype(np.float64) @ b[k:k + BK].astype(np.float64)
    return acc


@pytest.mark.parametrize("capability", [80, 90])
def test_a_scalar_read_every_iteration_comes_through_a_ring(capability):
    K = 200  # 7 blocks of 32, the last one 8 wide
    kernel = tir_opt(decayed_state, SIG, BLOCKS, attrs=ALIGNED)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    body = loop.regions[0]
    assert not _scalar_loads(body) and Op.LOAD not in ops(loop)
    # its copies: A's, B's and the scalar's, each issued ahead of the iteration that reads it
    assert ops(loop).count(Op.ASYNC_COPY) == 3
    rng = np.random.default_rng(capability)
    a = rng.integers(-2, 3, (64, K)).astype(np.float16)
    b = rng.integers(-2, 3, (K, 64)).astype(np.float16)
    g = rng.choice([0.5, 0.25, 2.0, -1.0], K).astype(np.float32)  # exact in f32: the sums are too
    c = np.full((64, 64), np.nan, np.float32)
    ek.run((1, 1, 1), [a, b, g, c, K])
    np.testing.assert_array_equal(c, _want(a, b, g, K, 32))


def test_a_scalar_narrower_than_a_copy_keeps_its_load():
    """A 2-byte scalar: cp.async moves 4, 8 or 16 bytes. The loop is pipelined without it."""
    kernel = tir_opt(decayed_state, {**SIG, "g_ptr": "*fp16"}, BLOCKS, attrs=ALIGNED)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    assert len(_scalar_loads(loop.regions[0])) == 1 and Op.ASYNC_COPY in ops(loop)
    K = 96
    rng = np.random.default_rng(1)
    a = rng.integers(-2, 3, (64, K)).astype(np.float16)
    b = rng.integers(-2, 3, (K, 64)).astype(np.float16)
    g = rng.choice([0.5, 2.0, -1.0], K).astype(np.float16)
    c = np.full((64, 64), np.nan, np.float32)
    ek.run((1, 1, 1), [a, b, g, c, K])
    np.testing.assert_array_equal(c, _want(a, b, g.astype(np.float32), K, 32))


@tegula.jit
def decayed_state_writing_back(a_ptr, b_ptr, g_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                               BK: tl.constexpr):
    """decayed_state that also writes each gate it reads, doubled, into the same array
    (its second half: no thread reads what another writes)."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        g_last = tl.load(g_ptr + k + BK - 1)
        tl.store(g_ptr + K + k + BK - 1, g_last * 2.0)
        acc = acc * g_last + tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_scalar_the_loop_writes_keeps_its_load():
    """A ring may not read ahead what the loop writes (`writes_what_it_prefetches`):
    the scalar goes back to a plain load, not a one-element tile left unprefetched,
    and the loop's tiles are still pipelined."""
    kernel = tir_opt(decayed_state_writing_back, SIG, BLOCKS, attrs=dict(ALIGNED, K=16))
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    assert len(_scalar_loads(loop.regions[0])) == 1 and Op.REDUCE not in ops(loop)
    assert ops(loop).count(Op.ASYNC_COPY) == 2
    K = 96
    rng = np.random.default_rng(2)
    a = rng.integers(-2, 3, (64, K)).astype(np.float16)
    b = rng.integers(-2, 3, (K, 64)).astype(np.float16)
    g = rng.choice([0.5, 2.0, -1.0], 2 * K).astype(np.float32)
    c = np.full((64, 64), np.nan, np.float32)
    g_run = g.copy()
    ek.run((1, 1, 1), [a, b, g_run, c, K])
    np.testing.assert_array_equal(c, _want(a, b, g, K, 32))
    np.testing.assert_array_equal(g_run[K + 31::32], 2 * g[31:K:32])


@tegula.jit
def gathered_rows(a_ptr, idx_ptr, b_ptr, c_ptr, n_blocks, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Each K step reads the A block whose row-block index a scalar load gives."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(n_blocks):
        blk = tl.load(idx_ptr + i)
        a = tl.load(a_ptr + (blk * BM + rm)[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + (i * BK + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("capability", [80, 90])
def test_a_scalar_index_of_the_tiles_stays_in_the_address_code(capability):
    """The scalar addresses A: it is read for iteration k+S-1 with that iteration's copies
    (`index_loads`), as before; made a one-element tile, the loop would not pipeline."""
    sig = {"a_ptr": "*fp16", "idx_ptr": "*i32", "b_ptr": "*fp16", "c_ptr": "*fp32", "n_blocks": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    kernel = tir_opt(gathered_rows, sig, BLOCKS, attrs={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16})
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    assert ops(loop).count(Op.ASYNC_COPY) == 2 and Op.REDUCE not in ops(loop)
    n, rows = 5, 4
    rng = np.random.default_rng(capability + 7)
    a = rng.integers(-2, 3, (rows * 64, 32)).astype(np.float16)
    idx = rng.integers(0, rows, n).astype(np.int32)
    b = rng.integers(-2, 3, (n * 32, 64)).astype(np.float16)
    c = np.full((64, 64), np.nan, np.float32)
    ek.run((1, 1, 1), [a, idx, b, c, n])
    want = sum(a[j * 64:(j + 1) * 64].astype(np.float64) @ b[i * 32:(i + 1) * 32].astype(np.float64)
               for i, j in enumerate(idx))
    np.testing.assert_array_equal(c, want)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("capability", [80, 90])
def test_the_scalar_copy_assembles(capability):
    # K a multiple of 16: A's and B's masks are constant over their 16-byte runs, so no
    # load of the loop is left to a plain ld.global
    kernel = tir_opt(decayed_state, SIG, BLOCKS, attrs=dict(ALIGNED, K=16))
    asm, _md = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, capability)
    assert "ld.global" not in asm["ptx"] and ", 4, " in asm["ptx"] and "cubin" in asm
