"""Flattened loop nests (`tl.range(..., flatten=True)`, `passes/flatten_loops.py`):
persistent matmuls whose tile loop asks to be flattened compute what the nest does —
bit for bit on the interpreter after the pass alone, and on the CUDA emulator, where
the flat loop is the one software-pipelined (cp.async rings at capability 80, TMA
rings feeding wgmma at 90), so the next tile's first copies are issued during the
current tile's last dots. Sizes are not multiples of the blocks; K = 0 (an empty inner
range: the epilogue still stores every tile) and fewer tiles than programs are covered."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.pipeline_candidates import zeroed_when
from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.ir.core import ArgAttrs
from tegula.ir.ops import Op
from tegula.ir.verifier import verify
from tegula.passes.flatten_loops import flatten_loops
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      PROGRAMS: tl.constexpr, FLAT: tl.constexpr):
    """Tutorial 09's persistent pointer kernel, reduced: tiles in row-major order, the
    epilogue's tile id counted separately (a value carried by the outer loop)."""
    start = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    tile_c = start - PROGRAMS
    for tile in tl.range(start, tl.cdiv(M, BM) * tiles_n, PROGRAMS, flatten=FLAT):
        rm = (tile // tiles_n) * BM + tl.arange(0, BM)
        rn = (tile % tiles_n) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            rk = ki * BK + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        tile_c += PROGRAMS
        cm = (tile_c // tiles_n) * BM + tl.arange(0, BM)
        cn = (tile_c % tiles_n) * BN + tl.arange(0, BN)
        c = acc.to(c_ptr.dtype.element_ty)
        tl.store(c_ptr + cm[:, None] * N + cn[None, :], c, mask=(cm[:, None] < M) & (cn[None, :] < N))


@tegula.jit
def persistent_desc_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                           PROGRAMS: tl.constexpr, FLAT: tl.constexpr, WS: tl.constexpr = False,
                           C_DESC: tl.constexpr = False):
    """Tutorial 09's descriptor kernel: B given as [N, K] and read through `.T`; C
    stored through pointers, or through a descriptor (`C_DESC`: TMA stores)."""
    start = tl.program_id(0)
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BN, BK])
    tiles_n = tl.cdiv(N, BN)
    for tile in tl.range(start, tl.cdiv(M, BM) * tiles_n, PROGRAMS, flatten=FLAT, warp_specialize=WS):
        om = (tile // tiles_n) * BM
        on = (tile % tiles_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            acc = tl.dot(a_desc.load([om, ki * BK]), b_desc.load([on, ki * BK]).T, acc)
        if C_DESC:
            tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN]).store([om, on], acc)
        else:
            rm = om + tl.arange(0, BM)
            rn = on + tl.arange(0, BN)
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _ir(fn, dtype, flat, bm, bn, bk, programs, k_div=1, c_dtype="fp32", **extra):
    """The tile IR of `fn`; `k_div` 8 lets A's and B's rows be copied 16 bytes at a
    time (TMA needs it of a descriptor's strides). The sizes' divisors are exact, as a
    launch measures them (no alignment version)."""
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{c_dtype}", "M": "i32", "N": "i32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "PROGRAMS": "constexpr", "FLAT": "constexpr"}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": ArgAttrs(1, exact_divisibility=True),
             **{n: ArgAttrs(k_div, exact_divisibility=True) for n in ("N", "K")}}
    cx = {"BM": bm, "BN": bn, "BK": bk, "PROGRAMS": programs, "FLAT": flat, **extra}
    sig.update({k: "constexpr" for k in extra})
    return optimized_ir(ASTSource(fn, signature=sig, constexprs=cx, attrs=attrs))


def _loops(block):
    return [i for i in block.walk() if i.op is Op.FOR]


@pytest.mark.parametrize("M, N, K", [(40, 33, 50), (16, 16, 0), (5, 70, 17), (40, 33, 16), (0, 5, 5)])
def test_the_flat_loop_computes_what_the_nest_does(M, N, K):
    kernel = _ir(persistent_matmul, "fp32", True, 16, 16, 16, 3)
    nest = _ir(persistent_matmul, "fp32", True, 16, 16, 16, 3)
    flatten_loops(kernel)
    verify(kernel)
    top = [i for i in kernel.body.instrs if i.op is Op.FOR]
    assert len(top) == 1 and not any(i.op is Op.FOR for i in top[0].regions[0].walk())  # one flat loop
    rng = np.random.default_rng(M * 7 + N + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    got, want = np.full((M, N), np.nan, np.float32), np.full((M, N), np.nan, np.float32)
    execute(kernel, (3, 1, 1), [a, b, got, M, N, K])
    execute(nest, (3, 1, 1), [a, b, want, M, N, K])
    assert got.tobytes() == want.tobytes()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)


def test_nests_that_do_not_fit_are_left_alone():
    """An inner range that depends on the outer iteration cannot be flattened by
    division; the hint is ignored."""
    @tegula.jit
    def triangle(out_ptr, n):
        for i in tl.range(0, n, flatten=True):
            total = 0
            for j in range(i):
                total += j
            tl.store(out_ptr + i, total)

    kernel = optimized_ir(ASTSource(triangle, signature={"out_ptr": "*i32", "n": "i32"}))
    before = len(_loops(kernel.body))
    flatten_loops(kernel)
    assert len(_loops(kernel.body)) == before == 2


# K 88: three inner iterations a tile, K 20 and 64: one and two (the copies' tile
# changes every iteration or every other one, the pipeline running two ahead)
@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("M, N, K", [(72, 100, 88), (40, 64, 0), (72, 100, 20), (130, 70, 64)])
def test_flattened_pointer_matmul_on_the_emulator(capability, M, N, K):
    kernel = _ir(persistent_matmul, "fp16", True, 64, 64, 32, 2)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    flat = [i for i in ek.lowering.kernel.body.instrs if i.op is Op.FOR]
    assert any(i.op is Op.ASYNC_COPY for i in flat[0].regions[0].walk())  # the flat loop is pipelined
    # the copies' tile coordinates (`tile // tiles_n`) are stepped, not divided, each
    # iteration: the division of the flat index and the ones after it run in an `if`
    # taken on a new tile (pipeline_memo)
    top = flat[0].regions[0].instrs
    guarded = [i for r in top if r.op is Op.IF for i in r.walk()]
    assert any(i.op is Op.IDIV for i in guarded)
    assert not any(i.op is Op.IDIV for i in top)
    rng = np.random.default_rng(capability + K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    ek.run((2, 1, 1), [a, b, c, M, N, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-3, atol=2e-3)


def test_flattened_accumulator_restarts_through_wgmma_scale_d():
    """A C of fp16 (tutorial 09's persistent pointer kernel): the zero initialiser is
    also the fallback loop's (K = 0) value in the store's layout, so the flat loop sees
    it moved into the accumulator's layout. The restart must still be recognised as a
    zero — wgmma's scale-d does it — or every flat iteration selects 128 accumulator
    registers and waits for the wgmma in flight before it can (the H200 ran the
    tutorial's kernel at 0.52x cuBLAS that way)."""
    kernel = _ir(persistent_matmul, "fp16", True, 64, 64, 32, 2, c_dtype="fp16")
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    flat = next(i for i in ek.lowering.kernel.body.instrs if i.op is Op.FOR)
    dot = next(i for i in flat.regions[0].walk() if i.op is Op.DOT)
    assert zeroed_when(dot.operands[2]) is not None
    M, N, K = 72, 100, 88
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    ek.run((2, 1, 1), [a, b, c, M, N, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("M, N, K", [(136, 72, 104), (64, 64, 32)])
def test_flattened_descriptor_matmul_runs_on_tma_and_wgmma(M, N, K):
    kernel = _ir(persistent_desc_matmul, "fp16", True, 64, 64, 32, 2, k_div=8)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    flat = next(i for i in ek.lowering.kernel.body.instrs if i.op is Op.FOR)
    inside = list(flat.regions[0].walk())
    assert any(i.op is Op.TMA_LOAD for i in inside)
    # the wgmma stays in flight across iterations; the epilogue waits for it inside its `if`
    assert any(i.op is Op.DOT_WAIT and i.attrs.pending == 1 for i in inside)
    assert any(i.op is Op.DOT_WAIT and i.attrs.pending == 0 for r in inside if r.op is Op.IF for i in r.walk())
    assert [c.version for c in ek.plan.mma.values()] == [3]
    rng = np.random.default_rng(K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    ek.run((2, 1, 1), [a, b, c, M, N, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("c_desc", [False, True], ids=["c_pointers", "c_tma_store"])
@pytest.mark.parametrize("M, N, K", [(136, 72, 104), (200, 64, 32)])  # K 32: one inner iteration a tile
def test_flattened_loop_warp_specialized(M, N, K, c_desc, monkeypatch):
    """`flatten=True, warp_specialize=True` (which Triton refuses on Hopper): a producer
    warpgroup issues the flat loop's copies, so the per-iteration address code (the
    next tile's coordinates, divisions included) leaves the consumers' path."""
    monkeypatch.setenv("TEGULA_WARP_SPECIALIZE", "1")
    kernel = _ir(persistent_desc_matmul, "fp16", True, 64, 64, 32, 2, k_div=8, WS=True, C_DESC=c_desc)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    assert any(i.op is Op.WARP_ROLE for i in ek.lowering.kernel.walk()) and ek.lowering.total_warps == 8
    # the consumers write C through TMA, from a buffer of the flat loop's (store_buffers)
    assert any(i.op is Op.TMA_STORE for i in ek.lowering.kernel.walk()) == c_desc
    rng = np.random.default_rng(K + 1)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    ek.run((2, 1, 1), [a, b, c, M, N, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=2e-3, atol=2e-3)


def test_flattened_loop_of_two_consumer_warpgroups_is_specialized_unasked(monkeypatch):
    """A flattened TMA loop at 8 warps gets a producer warpgroup without asking (measured
    faster on the H200); `TEGULA_WARP_SPECIALIZE=0` keeps it unsplit."""
    M, N, K = 200, 72, 96
    kernel = _ir(persistent_desc_matmul, "fp16", True, 128, 64, 32, 2, k_div=8)
    ek = EmulatedKernel(kernel, 8, capability=90, num_stages=3)
    assert any(i.op is Op.WARP_ROLE for i in ek.lowering.kernel.walk()) and ek.lowering.total_warps == 12
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    ek.run((2, 1, 1), [a, b, c, M, N, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=2e-3, atol=2e-3)
    monkeypatch.setenv("TEGULA_WARP_SPECIALIZE", "0")
    plain = EmulatedKernel(_ir(persistent_desc_matmul, "fp16", True, 128, 64, 32, 2, k_div=8), 8, capability=90,
                           num_stages=3)
    assert not any(i.op is Op.WARP_ROLE for i in plain.lowering.kernel.walk())


@tegula.jit
def blocks_by_division(a_ptr, b_ptr, c_ptr, n, d, B: tl.constexpr):
    """One loop (nothing to flatten) asking for `flatten`, whose copies' address code
    divides its index by a run-time value: the hint is dropped, so nothing reads the
    loop as a flat one (its index need not count from 0, its divisor be positive)."""
    r = tl.arange(0, B)
    acc = tl.zeros((B, B), dtype=tl.float32)
    for i in tl.range(1, n, 1, flatten=True):
        blk = -(i // d)  # d = -2, the division truncating: blocks 0, 1, 1, 2, 2, 3
        a = tl.load(a_ptr + blk * B * B + r[:, None] * B + r[None, :])
        b = tl.load(b_ptr + blk * B * B + r[:, None] * B + r[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + r[:, None] * B + r[None, :], acc)


def test_a_loop_that_is_not_a_nest_drops_the_flatten_hint():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "n": "i32", "d": "i32", "B": "constexpr"}
    kernel = optimized_ir(ASTSource(blocks_by_division, signature=sig, constexprs={"B": 16}))
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.body.walk() if i.op is Op.FOR)
    assert not loop.attrs.flatten
    assert any(i.op is Op.ASYNC_COPY for i in loop.regions[0].walk())  # pipelined all the same
    n, d, B = 7, -2, 16
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, B, B)).astype(np.float16)
    b = rng.standard_normal((4, B, B)).astype(np.float16)
    c = np.full((B, B), np.nan, np.float32)
    ek.run((1, 1, 1), [a, b, c, n, d])
    blocks = [-int(i / d) for i in range(1, n)]
    want = sum(a[k].astype(np.float64) @ b[k].astype(np.float64) for k in blocks)
    np.testing.assert_allclose(c, want, rtol=2e-3, atol=2e-3)
