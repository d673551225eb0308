"""Warp specialization (`tl.range(..., warp_specialize=True)`, sm_90a): a producer
warpgroup issues a TMA-pipelined loop's copies, the kernel's own warps compute, slots
handed over through full and empty mbarriers (`warp_specialize`, `warp_partitions`).

Run on the host emulator, whose threads are real OS threads (the partitions really run
concurrently, the named barriers and mbarriers really wait), against float64 numpy and
the same kernel unspecialized: descriptor matmuls with 4 and 8 consumer warps and
2 to 4 stages, sizes not multiples of the block, B read through `.T`; tutorial 06's
attention forward shape (carried coordinates, two dots, a register A operand) causal
and not. Also: the structure of the split (what each partition holds), where it is
refused, the launch's warp count, and ptxas on the PTX (setmaxnreg, named barriers)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from ws_kernels import ATT_ATTRS, ATT_SIG, MM_ATTRS, MM_SIG, ws_attention, ws_matmul, ws_persistent_matmul

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.compiler import ASTSource
from tegula.errors import CompilationError
from tegula.ir.ops import Op
from tegula.ir.types import TileType
from tegula.runtime.compiler import optimized_ir


@pytest.fixture(autouse=True)
def _specialization_on(monkeypatch):
    """Warp specialization is on by default (`TEGULA_WARP_SPECIALIZE`); these tests say
    so themselves, so that an environment switching it off does not skip the split."""
    monkeypatch.setenv("TEGULA_WARP_SPECIALIZE", "1")


def _matmul_ir(bm, bn, bk, b_nk, ws):
    cx = {"BM": bm, "BN": bn, "BK": bk, "B_NK": b_nk, "WS": ws}
    return optimized_ir(ASTSource(ws_matmul, signature=MM_SIG, constexprs=cx, attrs=MM_ATTRS))


def _ops(ek):
    return [i.op for i in ek.lowering.kernel.walk()]


def _split(ek):
    """The producer and consumer regions of the kernel's warp-role split."""
    split = next(i for i in ek.lowering.kernel.body.instrs if i.op is Op.IF)
    assert split.operands[0].owner.op is Op.WARP_ROLE
    return split.regions


@pytest.mark.parametrize("bm, bn, bk, stages, warps, b_nk", [
    (64, 64, 32, 2, 4, False),
    (64, 128, 32, 3, 4, True),
    (128, 128, 64, 4, 8, False),
    (128, 64, 64, 3, 8, True),
])
def test_specialized_matmul_matches_numpy_and_the_unspecialized_kernel(bm, bn, bk, stages, warps, b_nk):
    M, N, K = 144, 208, 336  # no block multiple; K leaves a partial last block
    rng = np.random.default_rng(bm + bn + bk + stages)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if b_nk else (K, N)).astype(np.float16)
    want = a.astype(np.float64) @ (b.T if b_nk else b).astype(np.float64)
    grid = (((M + bm - 1) // bm) * ((N + bn - 1) // bn), 1, 1)
    outs = {}
    for ws in (True, False):
        ek = EmulatedKernel(_matmul_ir(bm, bn, bk, b_nk, ws), warps, capability=90, num_stages=stages)
        assert (Op.WARP_ROLE in _ops(ek)) == ws
        assert ek.lowering.total_warps == warps + (4 if ws else 0)
        c = np.full((M, N), np.nan, np.float16)
        ek.run(grid, [a, b, c, M, N, K])
        outs[ws] = c
    np.testing.assert_allclose(outs[True].astype(np.float64), want, rtol=2e-2, atol=3e-2)
    np.testing.assert_array_equal(outs[True], outs[False])  # the same dots in the same order


@pytest.mark.parametrize("stages, warps", [(4, 4), (3, 8)])
def test_persistent_matmul_turns_its_rings_across_tiles(stages, warps):
    """A specialized K loop inside a loop over output tiles (`ws_persistent_matmul`):
    its rings and mbarriers are allocated once, before the tile loop, which carries
    the read slot and phase from tile to tile; 3 programs walk 12 tiles of 6 K blocks
    (not a multiple of the stages: each tile starts at another slot). Against float64
    numpy and the same kernel unspecialized."""
    M, N, K, bm, bn, bk = 144, 208, 336, 64, 64, 64
    rng = np.random.default_rng(stages)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    outs = {}
    for ws in (True, False):
        cx = {"BM": bm, "BN": bn, "BK": bk, "B_NK": False, "WS": ws}
        ir = optimized_ir(ASTSource(ws_persistent_matmul, signature=MM_SIG, constexprs=cx, attrs=MM_ATTRS))
        ek = EmulatedKernel(ir, warps, capability=90, num_stages=stages)
        top = [i.op for i in ek.lowering.kernel.body.instrs]
        assert (Op.WARP_ROLE in top) == ws
        if ws:  # the rings before the split, the tile loop inside each partition
            assert top.index(Op.LOCAL_ALLOC) < top.index(Op.WARP_ROLE) and Op.FOR not in top
        c = np.full((M, N), np.nan, np.float16)
        ek.run((3, 1, 1), [a, b, c, M, N, K])
        outs[ws] = c
    np.testing.assert_allclose(outs[True].astype(np.float64), want, rtol=2e-2, atol=3e-2)
    np.testing.assert_array_equal(outs[True], outs[False])


def test_the_partitions_hold_what_they_run():
    """The producer holds the copies, the empty waits and scalar code only; the
    consumers hold no copy; the empty mbarriers take one arrival per consumer warp."""
    ek = EmulatedKernel(_matmul_ir(64, 64, 32, False, True), 4, capability=90, num_stages=3)
    producer, consumer = _split(ek)
    p_ops = [i.op for i in producer.walk()]
    assert Op.TMA_LOAD in p_ops and Op.MBARRIER_WAIT in p_ops and Op.DOT not in p_ops
    assert not any(isinstance(v.type, TileType) for i in producer.walk() for v in i.results + i.operands)
    c_ops = [i.op for i in consumer.walk()]
    assert Op.TMA_LOAD not in c_ops and Op.MBARRIER_ARRIVE in c_ops and Op.DOT in c_ops
    assert Op.DEBUG_BARRIER not in c_ops  # slots are handed back through the empty mbarriers
    inits = [i for i in ek.lowering.kernel.walk() if i.op is Op.MBARRIER_INIT]
    assert sorted(i.attrs.count if i.attrs else 1 for i in inits) == [1, 1, 4]


def test_the_launch_reports_every_warp_and_ptxas_takes_the_partitions():
    ck = tegula.compile(ASTSource(ws_matmul, MM_SIG, {"BM": 128, "BN": 256, "BK": 64, "B_NK": False, "WS": True},
                                  attrs=MM_ATTRS),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
    assert ck.metadata.num_warps == 12
    ptx = ck.asm["ptx"]
    assert ".reqntid 384" in ptx and ".maxnreg 168" in ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", ptx)
    assert re.search(r"bar\.sync\s+1, 256;", ptx) and "mbarrier.arrive.shared::cta.b64" in ptx
    if find_ptxas() is not None:
        assert ck.metadata.n_spills == 0


@pytest.mark.parametrize("warps", [4, 8])
def test_partition_barriers_are_never_copied_into_divergent_paths(warps):
    """Every lane of a warp must reach the same `bar.sync`: LLVM had tail-duplicated an
    inline-asm `bar.sync 1, n` into both sides of `if tid == 0 { mbarrier.inval }`, so
    warp 0 waited at two different barriers (the likely cause of the hangs on the GPU;
    the emulator counts threads, not instructions, and ran it). Named barriers and
    setmaxnreg are convergent intrinsics now, and `.aligned` inline asm is convergent:
    the PTX has exactly the barriers the LLVM IR has."""
    bm, bn = (128, 256) if warps == 8 else (128, 128)
    ck = tegula.compile(ASTSource(ws_matmul, MM_SIG, {"BM": bm, "BN": bn, "BK": 64, "B_NK": False, "WS": True},
                                  attrs=MM_ATTRS),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 3})
    llir, ptx = ck.asm["llir"], ck.asm["ptx"]
    named = len(re.findall(r"call void @llvm\.nvvm\.barrier\.cta\.sync\.aligned\.count", llir))
    assert named > 0 and len(re.findall(rf"bar\.sync\s+1, {32 * warps};", ptx)) == named
    groups = dict(re.findall(r"^attributes (#\d+) = \{(.*)\}", llir, re.M))
    aligned = [line for line in llir.splitlines() if "asm" in line and ".aligned" in line]
    assert aligned and all("convergent" in line or "convergent" in groups.get(
        (re.search(r"\) (#\d+)", line) or [None, None])[1], "") for line in aligned)
    for action in ("inc", "dec"):
        assert ptx.count(f"setmaxnreg.{action}") == (1 if warps == 8 else 0)


@pytest.mark.parametrize("warps, bm, bn, d, causal", [(4, 64, 64, 64, False), (4, 128, 64, 64, True),
                                                      (8, 128, 64, 128, False)])
def test_specialized_attention_forward_matches_float64(warps, bm, bn, d, causal):
    H, N = 2, 192
    cx = {"D": d, "BM": bm, "BN": bn, "CAUSAL": causal, "WS": True}
    kernel = optimized_ir(ASTSource(ws_attention, signature=ATT_SIG, constexprs=cx, attrs=ATT_ATTRS))
    ek = EmulatedKernel(kernel, warps, capability=90, num_stages=3)
    assert Op.WARP_ROLE in _ops(ek)
    rng = np.random.default_rng(d + bm + causal)
    q, k, v = (rng.standard_normal((2, H, N, d)).astype(np.float16) * np.float16(0.5) for _ in range(3))
    o = np.zeros_like(q)
    sm_scale = 0.3
    ek.run(((N + bm - 1) // bm, 2 * H, 1), [q, k, v, o, sm_scale, H, N])
    s = np.einsum("zhmd,zhnd->zhmn", q.astype(np.float64), k.astype(np.float64)) * sm_scale
    if causal:
        s = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("zhmn,zhnd->zhmd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    np.testing.assert_allclose(o.astype(np.float64), want, atol=4e-3)


def test_split_is_refused_where_the_producer_would_need_a_tile():
    """Coordinates read from a loaded tile (a reduction) are not scalar code the producer
    can run: the loop stays unsplit (and correct)."""

    @tegula.jit
    def tile_coords(a_ptr, b_ptr, c_ptr, off_ptr, K, BM: tl.constexpr, BK: tl.constexpr):
        a_desc = tl.make_tensor_descriptor(a_ptr, [64, K], [K, 1], [BM, BK])
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, 64], [64, 1], [BK, 64])
        row = tl.sum(tl.load(off_ptr + tl.arange(0, 16)))
        acc = tl.zeros((BM, 64), dtype=tl.float32)
        for k in tl.range(0, K // BK, warp_specialize=True):
            acc = tl.dot(a_desc.load([row, k * BK]), b_desc.load([k * BK, 0]), acc)
        tl.store(c_ptr + tl.arange(0, BM)[:, None] * 64 + tl.arange(0, 64)[None, :], acc)

    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "off_ptr": "*i32", "K": "i32", "BM": "constexpr",
           "BK": "constexpr"}
    kernel = optimized_ir(ASTSource(tile_coords, signature=sig, constexprs={"BM": 64, "BK": 32},
                                    attrs={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "off_ptr": 16, "K": 16}))
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    ops = _ops(ek)
    assert Op.WARP_ROLE not in ops and Op.TMA_LOAD in ops and Op.MBARRIER_ARRIVE in ops
    rng = np.random.default_rng(5)
    K = 96
    a = rng.standard_normal((64, K)).astype(np.float16)
    b = rng.standard_normal((K, 64)).astype(np.float16)
    off = np.zeros(16, np.int32)
    c = np.zeros((64, 64), np.float32)
    ek.run((1, 1, 1), [a, b, c, off, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_pointer_loads_and_sm80_are_not_specialized():
    """Only TMA rings have a producer to hand them to; elsewhere the hint is a no-op."""
    ek = EmulatedKernel(_matmul_ir(64, 64, 32, False, True), 4, capability=80, num_stages=3)
    assert Op.WARP_ROLE not in _ops(ek) and ek.lowering.total_warps == 4


def test_the_hint_is_ignored_while_specialization_is_off(monkeypatch):
    monkeypatch.setenv("TEGULA_WARP_SPECIALIZE", "0")
    ek = EmulatedKernel(_matmul_ir(64, 64, 32, False, True), 4, capability=90, num_stages=3)
    ops = _ops(ek)
    assert Op.WARP_ROLE not in ops and Op.MBARRIER_ARRIVE not in ops and Op.TMA_LOAD in ops


def test_the_interpreter_refuses_specialized_tgir():
    from tegula.backends.interpreter import execute
    ek = EmulatedKernel(_matmul_ir(64, 64, 32, False, True), 4, capability=90, num_stages=3)
    with pytest.raises(CompilationError, match="warp-specialized"):
        execute(ek.lowering.kernel, (1, 1, 1), [np.zeros(1, np.float16)] * 3 + [1, 1, 1])
