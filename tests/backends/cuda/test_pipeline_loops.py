"""The software pipeliner (`backends/cuda/pipeline_loops`): which loops it rewrites,
translation validation on the interpreter (bit-identical results before and after),
results on the host emulator at capabilities 80 and 90 for 1-4 stages, and PTX that
ptxas assembles with cp.async in it."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.pipeline_loops import pipeline_loops
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.backends.interpreter import execute
from tegula.ir import print_ir
from tegula.ir.clone import clone_kernel
from tegula.ir.ops import Op
from tegula.ir.verifier import verify
from tegula.runtime.source import ASTSource


@tegula.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c_ptrs = c_ptr + rm[:, None] * scm + rn[None, :] * scn
    tl.store(c_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tegula.jit
def matmul_staged_range(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        STAGES: tl.constexpr):
    """Contiguous operands, the pipeline depth from tl.range(num_stages=...)."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=STAGES):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@tegula.jit
def matmul_scaled_a(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """A is computed (scaled after its load): it reaches the dot from registers."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0) * 2.0
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tegula.jit
def pointer_read_after_loop(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The advanced pointer is used after the loop: not pipelined (it would run ahead)."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(tl.load(a_ptrs), b)
        a_ptrs += BK
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc + tl.load(a_ptrs - BK).to(tl.float32).sum())


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
       "sam": "i32", "sak": "i32", "sbk": "i32", "sbn": "i32", "scm": "i32", "scn": "i32",
       "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
CUDA = GPUTarget("cuda", 90, 32)


def tir_opt(fn, signature, constexprs, num_stages=3, attrs=None):
    """The kernel as the CUDA backend receives it (frontend + tir_opt)."""
    src = ASTSource(fn, signature=signature, constexprs=constexprs, attrs=attrs)
    saved = os.environ.get("TEGULA_ALWAYS_COMPILE")
    os.environ["TEGULA_ALWAYS_COMPILE"] = "1"  # a disk-cache hit carries no IR
    try:
        return tegula.compile(src, target=CUDA, options={"num_warps": 4, "num_stages": num_stages}).ir
    finally:
        if saved is None:
            del os.environ["TEGULA_ALWAYS_COMPILE"]
        else:
            os.environ["TEGULA_ALWAYS_COMPILE"] = saved


def matmul_ir(bm=32, bn=32, bk=32, unit=(), div=None):
    """`unit`: the stride parameters specialized to 1 (constexprs, as a launch does);
    `div`: the divisibility the other pointers and strides are specialized on, so the
    loads along a unit stride are vectors (and copies cp.async)."""
    sig, cx = dict(SIG), {"BM": bm, "BN": bn, "BK": bk}
    for n in unit:
        sig[n], cx[n] = "constexpr", 1
    attrs = {n: div for n, t in sig.items() if t != "constexpr"} if div else None
    return tir_opt(matmul, sig, cx, attrs=attrs)


ROW_MAJOR = ("sak", "sbn", "scn")
B_COLUMN_MAJOR = ("sak", "sbk", "scn")
A_COLUMN_MAJOR = ("sam", "sbn", "scn")


def ops(kernel):
    return [ins.op for ins in kernel.walk()]


def matmul_args(kernel, M, N, K, rng, transpose_b=False, transpose_a=False):
    """Arguments in the order of `kernel.args` (constexpr strides are not among them),
    and the float64 reference."""
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    if transpose_b:  # column-major B: its loads run along K
        b = np.asfortranarray(b)
    if transpose_a:  # column-major A: its loads run along M
        a = np.asfortranarray(a)
    c = np.full((M, N), np.nan, np.float32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K,
              "sam": a.strides[0] // 2, "sak": a.strides[1] // 2,
              "sbk": b.strides[0] // 2, "sbn": b.strides[1] // 2, "scm": N, "scn": 1}
    return [values[n] for n in kernel.arg_names], a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_loads_feeding_dots_become_rings(stages):
    k = clone_kernel(matmul_ir())
    assert pipeline_loops(k, stages, 4, 90) == 1
    verify(k, stage="tgir")
    text = print_ir(k)
    assert text.count("local_alloc") == 2 and f"smem<{stages}x32x32xf16>" in text
    assert ops(k).count(Op.ASYNC_COPY) == 2 * stages  # S-1 prologue groups + the loop's
    assert ops(k).count(Op.ASYNC_COMMIT) == stages
    assert Op.LOAD not in [i.op for loop in k.walk() if loop.op is Op.FOR for i in loop.regions[0].instrs]
    waits = [ln.strip() for ln in text.splitlines() if "async_wait" in ln]
    assert (f"async_wait {{pending = {stages - 2}}}" if stages > 2 else "async_wait") in waits
    assert "async_wait" in waits  # the drain after the loop: pending = 0, the default


def test_carried_pointers_advance_after_the_copies():
    # the copies read the carried pointers; their advance for the next iteration comes
    # after the copies' commit, so old and new pointers are not both live across the
    # copies (ptxas then updated the copies' address registers in place right after
    # them, each update waiting for its cp.async to read the register)
    k = clone_kernel(matmul_ir(unit=ROW_MAJOR, div=16))
    assert pipeline_loops(k, 3, 4, 90) == 1
    loop = next(i for i in k.walk() if i.op is Op.FOR)
    body = loop.regions[0].instrs
    commit = [i for i, ins in enumerate(body) if ins.op is Op.ASYNC_COMMIT]
    copies = [i for i, ins in enumerate(body) if ins.op is Op.ASYNC_COPY]
    advances = [i for i, ins in enumerate(body) if ins.op is Op.ADDPTR
                and any(u is body[-1] for u in body if ins.results[0] in u.operands)]
    assert len(advances) == 2 and len(commit) == 1 and len(copies) == 2
    assert min(advances) > commit[0] > max(copies)
    carried = set(loop.regions[0].args)
    assert all(body[i].operands[0] in carried for i in advances)


def test_what_is_left_alone():
    # one stage, and GPUs without cp.async
    assert pipeline_loops(clone_kernel(matmul_ir()), 1, 4, 90) == 0
    assert pipeline_loops(clone_kernel(matmul_ir()), 3, 4, 75) == 0
    # a loop-carried pointer read after the loop
    k = tir_opt(pointer_read_after_loop, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32",
                                          "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
                {"BM": 32, "BN": 32, "BK": 32})
    assert pipeline_loops(clone_kernel(k), 3, 4, 90) == 0
    # the caller's kernel is never changed by the backend
    original = matmul_ir()
    before = print_ir(original)
    compile_kernel(original, {"num_warps": 4, "num_stages": 3}, 90)
    assert print_ir(original) == before


def test_rings_shrink_to_fit_shared_memory():
    k = clone_kernel(matmul_ir(128, 128, 64))  # 32 KiB a stage
    assert pipeline_loops(k, 8, 4, 86) == 1     # 99 KiB on sm_86: 3 stages fit
    assert "smem<3x128x64xf16>" in print_ir(k)


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("M,N,K", [(32, 32, 32), (45, 50, 77), (64, 40, 200)])
def test_translation_validation_on_the_interpreter(stages, M, N, K):
    """Bit-identical outputs before and after the rewrite (copies complete at issue)."""
    before = matmul_ir()
    after = clone_kernel(before)
    assert pipeline_loops(after, stages, 4, 80) == 1
    outs = []
    for kernel in (before, after):
        args, _ = matmul_args(kernel, M, N, K, np.random.default_rng(K))
        execute(kernel, ((M + 31) // 32, (N + 31) // 32, 1), args)
        outs.append(args[2])
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("layout", ["generic", "row_major", "b_column_major"])
def test_pipelined_matmul_on_the_emulator(capability, stages, layout):
    """Masks on every edge, iteration counts below and above S-1; copies of 2 bytes
    (through registers), 16-byte cp.async, and B read along K."""
    M, N, K = 48, 56, 88
    unit = {"generic": (), "row_major": ROW_MAJOR, "b_column_major": B_COLUMN_MAJOR}[layout]
    kernel = matmul_ir(unit=unit, div=8 if unit else None)
    args, want = matmul_args(kernel, M, N, K, np.random.default_rng(stages + capability),
                             transpose_b=layout == "b_column_major")
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=stages)
    assert (Op.ASYNC_COPY in ops(ek.lowering.kernel)) == (stages > 1)
    ek.run((2, 2, 1), args)
    np.testing.assert_allclose(args[2], want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("num_warps", [4, 8])
@pytest.mark.parametrize("layout", ["generic", "row_major", "b_column_major", "a_column_major"])
def test_wgmma_matmul_on_the_emulator(num_warps, layout):
    """sm_90a: pipelined f16 slots in the NVMMA layout read by wgmma through matrix
    descriptors (A K-major or M-major, B N-major or K-major), one or two warpgroups;
    K steps over 64-byte and 128-byte swizzled rows."""
    M, N, K = 120, 72, 150
    unit = {"generic": (), "row_major": ROW_MAJOR, "b_column_major": B_COLUMN_MAJOR,
            "a_column_major": A_COLUMN_MAJOR}[layout]
    for bm, bn, bk in ((64, 32, 32), (128, 64, 64)):
        kernel = matmul_ir(bm, bn, bk, unit=unit, div=2 if unit else None)
        args, want = matmul_args(kernel, M, N, K, np.random.default_rng(bm + num_warps),
                                 transpose_b=layout == "b_column_major", transpose_a=layout == "a_column_major")
        ek = EmulatedKernel(kernel, num_warps, capability=90, num_stages=3)
        assert [c.version for c in ek.plan.mma.values()] == [3]
        ek.run(((M + bm - 1) // bm, (N + bn - 1) // bn, 1), args)
        np.testing.assert_allclose(args[2], want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("num_warps", [4, 8])
def test_wgmma_with_a_from_registers_on_the_emulator(num_warps):
    """B pipelined into a slot, A computed in registers: wgmma's register-A form."""
    M, N, K = 120, 72, 150
    for bm, bn, bk in ((64, 32, 32), (128, 64, 64)):
        kernel = tir_opt(matmul_scaled_a, SIG, {"BM": bm, "BN": bn, "BK": bk})
        args, want = matmul_args(kernel, M, N, K, np.random.default_rng(bm + num_warps))
        ek = EmulatedKernel(kernel, num_warps, capability=90, num_stages=3)
        dots = [i for i in ek.lowering.kernel.walk() if i.op is Op.DOT]
        assert [ek.plan.mma[d].version for d in dots] == [3]
        assert dots[0].operands[0].owner.op is not Op.LOCAL_LOAD
        ek.run(((M + bm - 1) // bm, (N + bn - 1) // bn, 1), args)
        np.testing.assert_allclose(args[2], 2 * want, rtol=2e-3, atol=4e-3)


@pytest.mark.parametrize("stages", [2, 3])
def test_num_stages_from_tl_range(stages):
    BM, BN, BK, K = 32, 64, 32, 160
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "STAGES": "constexpr"}
    k = tir_opt(matmul_staged_range, sig, {"BM": BM, "BN": BN, "BK": BK, "STAGES": stages}, num_stages=1,
                attrs={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16})
    loop = next(i for i in k.walk() if i.op is Op.FOR)
    assert loop.attrs.num_stages == stages
    ek = EmulatedKernel(k, 4, capability=80, num_stages=1)  # the loop's own hint wins
    assert f"smem<{stages}x" in print_ir(ek.lowering.kernel)
    rng = np.random.default_rng(stages)
    a = rng.standard_normal((BM, K)).astype(np.float16)
    b = rng.standard_normal((K, BN)).astype(np.float16)
    c = np.zeros((BM, BN), np.float32)
    ek.run((1, 1, 1), [a, b, c, K])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-3, atol=2e-3)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("unit", [ROW_MAJOR, B_COLUMN_MAJOR])
def test_ptx_has_cp_async_and_assembles(capability, unit):
    """16-byte copies only (no register path), whichever way B is stored: a column-major
    B is kept K-contiguous in its slots and read by ldmatrix without .trans (sm_80), or
    by wgmma as a K-major B (sm_90a: imm-trans-b 0)."""
    asm, md = compile_kernel(matmul_ir(128, 128, 32, unit=unit, div=16),
                             {"num_warps": 4, "num_stages": 3}, capability)
    ptx = asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 1" in ptx
    assert "ld.global" not in ptx and "cp.async.ca" not in ptx
    if capability == 80:
        assert ("ldmatrix.sync.aligned.m8n8.x4.trans" in ptx) == (unit == ROW_MAJOR)
    else:
        # cp.async alone fills the slots: no proxy fence (it would drain the pipeline)
        assert "ldmatrix" not in ptx and "mma.sync" not in ptx and "fence.proxy.async" not in ptx
        assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
        assert f"p, 1, 1, 0, {int(unit == ROW_MAJOR)};" in ptx
        assert "wgmma.wait_group.sync.aligned 1" in ptx and "wgmma.wait_group.sync.aligned 0" in ptx
    assert "cp.async.commit_group" in ptx
    assert md["shared"] >= 3 * (128 * 32 + 32 * 128) * 2
    assert "cubin" in asm


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_slots_written_by_stores_get_the_proxy_fence():
    """2-byte runs (nothing known about the alignment) are too narrow for cp.async and
    go into the slots through registers and st.shared: wgmma then reads them only
    after `fence.proxy.async`."""
    asm, _ = compile_kernel(matmul_ir(128, 128, 32, unit=ROW_MAJOR, div=1), {"num_warps": 4, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    assert "st.shared" in ptx and "wgmma.mma_async" in ptx
    assert "fence.proxy.async.shared::cta" in ptx


@tegula.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, tiles, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, KSTEP: tl.constexpr):
    """Row-major A [M, K], B [K, N], C [M, N]; each program loops over output tiles
    (an outer loop around the pipelined K loop, as persistent kernels do), the K loop
    strides by KSTEP * BK and takes the remaining blocks of K in a second loop, and a
    tile whose row is odd is scaled inside the loop by a branch."""
    rk = tl.arange(0, BK)
    for t in range(tl.program_id(0), tiles, tl.num_programs(0)):
        rm = (t // tl.cdiv(N, BN)) * BM + tl.arange(0, BM)
        rn = (t % tl.cdiv(N, BN)) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, KSTEP * BK):
            for j in tl.static_range(KSTEP):
                kk = k0 + j * BK + rk
                a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                            other=0.0)
                b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N),
                            other=0.0)
                acc = tl.dot(a, b, acc)
            if (t % 2) == 1:
                acc = acc * 1.0
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("K", [0, 16, 150])
def test_nested_strided_and_empty_loops(capability, K):
    """The inner K loop of a persistent kernel, with two loads and dots per iteration
    (KSTEP 2), a branch in the body, and K = 0 (no iteration: copies predicated off,
    nothing in flight)."""
    M, N, BM, BN, BK = 70, 72, 64, 32, 32
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "tiles": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "KSTEP": "constexpr"}
    kernel = tir_opt(persistent_matmul, sig, {"BM": BM, "BN": BN, "BK": BK, "KSTEP": 2})
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    assert Op.ASYNC_COPY in ops(ek.lowering.kernel)
    rng = np.random.default_rng(K + capability)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    tiles = ((M + BM - 1) // BM) * ((N + BN - 1) // BN)
    ek.run((3, 1, 1), [a, b, c, M, N, K, tiles])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-3, atol=2e-3)


SHAPE_OPS = {Op.LOCAL_ALLOC, Op.LOCAL_DEALLOC, Op.LOCAL_LOAD, Op.ASYNC_COPY, Op.ASYNC_COMMIT, Op.ASYNC_WAIT,
             Op.DOT, Op.DOT_WAIT, Op.DEBUG_BARRIER, Op.FOR, Op.YIELD}


def _shape_of_block(block):
    return [ins.op.value for ins in block.instrs if ins.op in SHAPE_OPS]


@pytest.mark.parametrize("capability", [80, 90])
def test_golden_schedule(capability):
    """The order of the pipeliner's ops, 3 stages: on sm_80 the next copies go out
    before the dot; on sm_90a the wgmma stays in flight (dot_wait 1) and the copies
    follow it and a barrier; both keep two iterations of copies ahead."""
    k = matmul_ir(64, 64, 32, unit=ROW_MAJOR, div=16)
    ek = EmulatedKernel(k, 4, capability=capability, num_stages=3)
    top = ek.lowering.kernel.body
    loop = next(i for i in top.instrs if i.op is Op.FOR)
    prologue = ["async_copy", "async_copy", "async_commit"] * 2
    after = (["dot_wait"] if capability == 90 else []) + ["async_wait", "local_dealloc", "local_dealloc"]
    assert _shape_of_block(top) == ["local_alloc", "local_alloc", *prologue, "for", *after]
    issue = ["async_copy", "async_copy", "async_commit"]
    if capability == 80:
        body = ["async_wait", "local_load", "local_load", *issue, "dot", "yield"]
    else:
        body = ["async_wait", "local_load", "local_load", "dot", "dot_wait", "debug_barrier", *issue, "yield"]
    assert _shape_of_block(loop.regions[0]) == body
    waits = [i.attrs.pending for i in ek.lowering.kernel.walk() if i.op in (Op.ASYNC_WAIT, Op.DOT_WAIT)]
    assert waits == ([1, 0] if capability == 80 else [1, 1, 0, 0])


@pytest.mark.parametrize("fmt", ["fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_fp8_wgmma_on_the_emulator(fmt, num_warps):
    """fp8 dots run on wgmma (k32, no transposes) when A and B are pipelined slots:
    a column-major B copied K-major as it lies, a row-major one transposed on its way
    into a K-major slot (through registers)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    np_fmt = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}[fmt]
    M, N, K = 120, 72, 160
    sig = dict(SIG, a_ptr=f"*{fmt}", b_ptr=f"*{fmt}")
    for unit, versions in ((B_COLUMN_MAJOR, [3]), (ROW_MAJOR, [3])):
        cx = {"BM": 64, "BN": 32, "BK": 64}
        sig_u = dict(sig)
        for n in unit:
            sig_u[n], cx[n] = "constexpr", 1
        attrs = {n: 8 for n, t in sig_u.items() if t != "constexpr"}  # 120, 72, 160: all divisible by 8
        kernel = tir_opt(matmul, sig_u, cx, attrs=attrs)
        ek = EmulatedKernel(kernel, num_warps, capability=90, num_stages=3)
        assert [c.version for c in ek.plan.mma.values()] == versions
        rng = np.random.default_rng(num_warps)
        a = rng.standard_normal((M, K)).astype(np_fmt)
        b = rng.standard_normal((K, N)).astype(np_fmt)
        if unit == B_COLUMN_MAJOR:
            b = np.asfortranarray(b)
        c = np.full((M, N), np.nan, np.float32)
        values = {"a_ptr": a.view(np.uint8), "b_ptr": b.view(np.uint8), "c_ptr": c, "M": M, "N": N, "K": K,
                  "sam": K, "sbk": b.strides[0], "sbn": b.strides[1], "scm": N}
        ek.run(((M + 63) // 64, (N + 31) // 32, 1), [values[n] for n in kernel.arg_names])
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_fp8_wgmma_ptx_assembles():
    sig = dict(SIG, a_ptr="*fp8e4nv", b_ptr="*fp8e4nv")
    cx = {"BM": 128, "BN": 128, "BK": 128}
    for n in B_COLUMN_MAJOR:
        sig[n], cx[n] = "constexpr", 1
    kernel = tir_opt(matmul, sig, cx, attrs={n: 16 for n, t in sig.items() if t != "constexpr"})
    asm, _md = compile_kernel(kernel, {"num_warps": 8, "num_stages": 3}, 90)
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in asm["ptx"] and "cubin" in asm
    assert "p, 1, 1;" in asm["ptx"]  # no transpose operands for 8-bit types


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_m_major_a_wgmma_ptx_assembles():
    """A column-major A is copied along M with 16-byte cp.async into an M-major slot,
    which wgmma reads with imm-trans-a 1."""
    asm, _md = compile_kernel(matmul_ir(128, 128, 64, unit=A_COLUMN_MAJOR, div=16),
                              {"num_warps": 8, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    assert "ld.global" not in ptx and "cp.async.cg.shared.global" in ptx
    assert "p, 1, 1, 1, 1;" in ptx and "cubin" in asm


@tegula.jit
def matmul_scaled_b(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """B is computed (scaled after its load): on sm_80 it is staged through scratch
    inside the loop, beside the rings of A and of B's load."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :]) * 2.0
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_pipeline_depth_shrinks_until_the_kernel_fits():
    """A's and B's rings (B prefetched, read back and scaled) fit an sm_80's shared
    memory (163 KiB) with 3 slots each, not beside B's scratch inside the loop (32 KiB,
    the mma.sync staging of the scaled B): the compile retries with 2."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    k = tir_opt(matmul_scaled_b, sig, {"BM": 128, "BN": 256, "BK": 64},
                attrs={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16})
    asm, md = compile_kernel(k, {"num_warps": 8, "num_stages": 9}, 80)
    assert "smem<2x128x64xf16>" in asm["tgir"] and "smem<2x64x256xf16>" in asm["tgir"]
    assert 2 * (128 * 64 + 64 * 256) * 2 + 64 * 256 * 2 <= md["shared"] <= 166912


@tegula.jit
def scaled_rows_loop(a_ptr, b_ptr, s_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     MASK_BY_INDEX: tl.constexpr):
    """Each K block's dot scaled per column by a 1-D load (attention backward's row
    maxima and deltas have this shape); with MASK_BY_INDEX the index of that load also
    feeds the math: the loop then carries it S-1 iterations behind too (`lagged`)."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    col = 0
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        scale = tl.load(s_ptr + col + rn)
        part = tl.dot(a, b) * scale[None, :]
        if MASK_BY_INDEX:
            part = tl.where((col + rn)[None, :] % 3 == 0, 0.0, part)
        acc += part
        col += BN
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("mask_by_index", [False, True])
@pytest.mark.parametrize("capability", [80, 90])
def test_vector_loads_of_dot_loops_are_prefetched(capability, mask_by_index):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "s_ptr": "*fp32", "c_ptr": "*fp32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "MASK_BY_INDEX": "constexpr"}
    BM, BN, BK, K = 64, 32, 32, 96
    k = tir_opt(scaled_rows_loop, sig, {"BM": BM, "BN": BN, "BK": BK, "MASK_BY_INDEX": mask_by_index},
                attrs={"a_ptr": 16, "b_ptr": 16, "s_ptr": 16, "c_ptr": 16, "K": 16})
    tgir = compile_kernel(k, {"num_warps": 4, "num_stages": 3}, capability)[0]["tgir"]
    assert "smem<3x64x32xf16>" in tgir and "smem<3x32x32xf16>" in tgir  # the dot operands' rings
    assert "smem<3x32xf32>" in tgir                                      # the vector's ring
    # with the mask, the column its copies run two iterations ahead with is also carried
    # as this iteration's and the next one's, for the math: two operands more
    operands = re.search(r"= for ([^:]*) :", tgir).group(1).split(", ")
    assert len(operands) == (9 if mask_by_index else 7), operands  # bounds, acc, col, slots
    rng = np.random.default_rng(5)
    a = rng.integers(-2, 3, (BM, K)).astype(np.float16)
    b = rng.integers(-2, 3, (K, BN)).astype(np.float16)
    s = rng.integers(1, 4, K // BK * BN).astype(np.float32)
    want = np.zeros((BM, BN))
    for i, k0 in enumerate(range(0, K, BK)):
        part = a[:, k0:k0 + BK].astype(np.float64) @ b[k0:k0 + BK] * s[i * BN:(i + 1) * BN][None, :]
        if mask_by_index:
            part[:, (i * BN + np.arange(BN)) % 3 == 0] = 0.0
        want += part
    c = np.zeros((BM, BN), np.float32)
    EmulatedKernel(k, 4, capability=capability, num_stages=3).run((1, 1, 1), [a, b, s, c, K])
    np.testing.assert_array_equal(c, want)
