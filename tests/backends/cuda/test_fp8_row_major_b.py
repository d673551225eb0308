"""8-bit dots (fp8 e4m3/e5m2, int8) whose B lies row-major ([K, N], N contiguous) — and
whose A lies column-major — on Hopper's wgmma: wgmma takes 8-bit operands K-major only,
so their slots are stored K-major whichever way the copies run. A pipelined loop stages
such an operand the way its copies run and transposes each landed slot in shared
memory (`local_copy`); a lone dot copies it through registers (Triton's transposing
local store), four K rows a thread so that each shared store writes four transposed
bytes. Before, such a dot fell to FMAs (fp8) or mma.sync (int8) on sm_90a. Checked on
the host emulator against float64 — a pipelined K loop with masks and K no multiple of
the block, a chained dot after it (test_dot's chain-dot epilogue: the accumulator cast
to 8 bits times a staged W), a lone dot, 4 and 8 warps — on the interpreter (the
staged rewrite gives the unpipelined loop's results bit for bit), and in the PTX, which
assembles for sm_90a; sm_80 keeps mma.sync (int8) and FMAs (fp8)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.pipeline_loops import pipeline_loops
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.ir import print_ir
from tegula.ir.clone import clone_kernel
from tegula.ir.verifier import verify
from tegula.runtime.compiler import optimized_ir

_TYPES = {"fp8e4nv": ("f32", "e4m3"), "fp8e5": ("f32", "e5m2"), "i8": ("i32", "s8")}


@tegula.jit
def matmul_chain(a_ptr, b_ptr, w_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, CHAIN: tl.constexpr, ACC: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, b, acc, out_dtype=ACC)
    if CHAIN:
        w = tl.load(w_ptr + rn[:, None] * BN + rn[None, :])
        acc = tl.dot(acc.to(w.dtype), w, out_dtype=ACC)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tegula.jit
def lone_dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, out_dtype=ACC))


def _acc(fmt):
    return tl.int32 if fmt == "i8" else tl.float32


def _chain_kernel(fmt, chain, a_column_major=False, bm=64, bn=64, bk=64):
    sig = {"a_ptr": f"*{fmt}", "b_ptr": f"*{fmt}", "w_ptr": f"*{fmt}", "c_ptr": f"*{_TYPES[fmt][0]}",
           "M": "i32", "N": "i32", "K": "i32", "sam": "i32", "sak": "i32", "sbk": "i32", "sbn": "constexpr",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "CHAIN": "constexpr", "ACC": "constexpr"}
    cx = {"sbn": 1, "BM": bm, "BN": bn, "BK": bk, "CHAIN": chain, "ACC": _acc(fmt)}
    unit = "sam" if a_column_major else "sak"
    sig[unit], cx[unit] = "constexpr", 1
    return optimized_ir(ASTSource(matmul_chain, signature=sig, constexprs=cx,
                                  attrs={n: 16 for n, t in sig.items() if t != "constexpr"}))


def _lone_kernel(fmt, bm=64, bn=64, bk=64):
    sig = {"a_ptr": f"*{fmt}", "b_ptr": f"*{fmt}", "c_ptr": f"*{_TYPES[fmt][0]}",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "ACC": "constexpr"}
    cx = {"BM": bm, "BN": bn, "BK": bk, "ACC": _acc(fmt)}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16}
    return optimized_ir(ASTSource(lone_dot, signature=sig, constexprs=cx, attrs=attrs))


def _random(fmt, shape, rng):
    """(what the kernel reads, its float64 value)."""
    if fmt == "i8":
        x = rng.integers(-128, 128, shape, dtype=np.int8)
        return x, x.astype(np.float64)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = rng.standard_normal(shape).astype({"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}[fmt])
    return x.view(np.uint8), x.astype(np.float64)


def _to_8bit(fmt, x):
    """The epilogue's cast of an f32/i32 accumulator to the 8-bit type, in float64."""
    if fmt == "i8":
        return x.astype(np.int64).astype(np.int8).astype(np.float64)  # wraps, as the cast
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}[fmt]
    return x.astype(np.float32).astype(t).astype(np.float64)


def _check(fmt, got, want):
    if fmt == "i8":
        np.testing.assert_array_equal(got, want.astype(np.int64).astype(np.int32))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("num_warps, stages", [(4, 3), (8, 3), (4, 2)])
@pytest.mark.parametrize("chain", [False, True], ids=["loop", "chain"])
@pytest.mark.parametrize("a_column_major", [False, True], ids=["a_row", "a_col"])
@pytest.mark.parametrize("fmt", list(_TYPES))
def test_row_major_b_on_wgmma(fmt, a_column_major, chain, num_warps, stages):
    kernel = _chain_kernel(fmt, chain, a_column_major)
    ek = EmulatedKernel(kernel, num_warps, capability=90, num_stages=stages)
    assert [c.version for c in ek.plan.mma.values()] == [3] * (1 + chain)
    M, N, K = 112, 48, 176  # K no multiple of BK (masked), M and N neither; all divisible by 16 as specialized
    rng = np.random.default_rng(hash((fmt, a_column_major, chain, num_warps, stages)) % 2**32)
    a, a64 = _random(fmt, (M, K), rng)
    if a_column_major:
        a = np.asfortranarray(a)
    b, b64 = _random(fmt, (K, N), rng)
    w, w64 = _random(fmt, (64, 64), rng)
    c = np.zeros((M, 64), np.int32 if fmt == "i8" else np.float32)
    values = {"a_ptr": a, "b_ptr": b, "w_ptr": w, "c_ptr": c, "M": M, "N": N, "K": K,
              "sam": a.strides[0] // a.itemsize, "sak": a.strides[1] // a.itemsize, "sbk": N}
    ek.run(((M + 63) // 64, 1, 1), [values[n] for n in kernel.arg_names])
    want = a64 @ b64
    if chain:
        full = np.zeros((M, 64))
        full[:, :N] = want
        want = (_to_8bit(fmt, full) @ w64)[:, :N]
    _check(fmt, c[:, :N], want)


@pytest.mark.parametrize("num_warps", [4, 8])
@pytest.mark.parametrize("fmt", list(_TYPES))
def test_lone_dot_with_row_major_b(fmt, num_warps):
    """No loop: B is staged in shared memory before the dot (`stage_operands`),
    transposed on its way in."""
    kernel = _lone_kernel(fmt)
    ek = EmulatedKernel(kernel, num_warps, capability=90, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [3]
    rng = np.random.default_rng(5 + num_warps)
    a, a64 = _random(fmt, (64, 64), rng)
    b, b64 = _random(fmt, (64, 64), rng)
    c = np.zeros((64, 64), np.int32 if fmt == "i8" else np.float32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    _check(fmt, c, a64 @ b64)


@pytest.mark.parametrize("fmt", list(_TYPES))
def test_sm80_unchanged(fmt):
    """sm_80 has no fp8 tensor-core path here (FMAs); int8 stays on mma.sync, ldmatrix
    reading a K-major slot the copies transposed, as before."""
    kernel = _chain_kernel(fmt, False)
    ek = EmulatedKernel(kernel, 4, capability=80, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == ([2] if fmt == "i8" else [])
    M, N, K = 70, 64, 96
    rng = np.random.default_rng(3)
    a, a64 = _random(fmt, (M, K), rng)
    b, b64 = _random(fmt, (K, N), rng)
    c = np.zeros((M, 64), np.int32 if fmt == "i8" else np.float32)
    values = {"a_ptr": a, "b_ptr": b, "w_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K, "sam": K, "sbk": N}
    ek.run(((M + 63) // 64, 1, 1), [values[n] for n in kernel.arg_names])
    _check(fmt, c, a64 @ b64)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("chain", [False, True], ids=["loop", "chain"])
@pytest.mark.parametrize("fmt", list(_TYPES))
def test_row_major_b_ptx(fmt, chain):
    """Triton's test_dot looks for `wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2`
    (and `.e4m3`, `.s32.s8.s8`) with a row-major B; the slots written by st.shared get
    the proxy fence before wgmma reads them; the PTX assembles for sm_90a."""
    acc, ab = _TYPES[fmt]
    asm, _md = compile_kernel(_chain_kernel(fmt, chain, bm=128, bn=128, bk=64), {"num_warps": 8, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    want = f"wgmma.mma_async.sync.aligned.m64n128k32.{'s32' if acc == 'i32' else 'f32'}.{ab}.{ab}"
    assert want in ptx and "cubin" in asm
    assert "fence.proxy.async" in ptx
    assert not re.search(r"\bfma\.rn\.f32\b", ptx)  # nothing left on the FMA path


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_lone_dot_ptx():
    asm, _md = compile_kernel(_lone_kernel("fp8e5", 64, 128, 64), {"num_warps": 4}, 90)
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2" in asm["ptx"] and "cubin" in asm


def _store_widths(ptx):
    return {w: len(re.findall(r"st\.shared\." + w + r"\s", ptx)) for w in ("b8", "u8", "b32", "v2.b32")}


@pytest.mark.parametrize("a_column_major", [False, True], ids=["a_row", "a_col"])
def test_pipelined_loop_stages_and_transposes_on_chip(a_column_major):
    """Each operand copied across its K-major slot gets a staging ring (filled by 16-byte
    cp.async) and two K-major buffers, one `local_copy` an iteration between them; the
    dots read the K-major buffer. The PTX reads the staging slot 16 bytes at a time and
    writes the K-major one 32 bits at a time, never a byte."""
    kernel = clone_kernel(_chain_kernel("fp8e4nv", False, a_column_major, bm=128, bn=128, bk=64))
    assert pipeline_loops(kernel, 3, 8, 90) == 1
    verify(kernel, stage="tgir")
    text = print_ir(kernel)
    staged = 1 + a_column_major
    assert text.count("local_copy") == staged
    assert text.count("smem<2x") == staged  # the K-major buffers (the rings have 3 slots)
    asm, md = compile_kernel(_chain_kernel("fp8e4nv", False, a_column_major, bm=128, bn=128, bk=64),
                             {"num_warps": 8, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    widths = _store_widths(ptx)
    assert widths["b8"] == widths["u8"] == 0 and widths["b32"] > 0
    assert "ld.shared.v4" in ptx and "cp.async.cg.shared.global" in ptx
    # the 128x64 B staged and transposed: 3 staging slots + 2 K-major buffers of 8 KiB
    assert md["shared"] >= (3 + 2) * 128 * 64 + 3 * 128 * 64


@pytest.mark.parametrize("fmt", ["fp8e5", "i8"])
def test_staged_rewrite_on_the_interpreter(fmt):
    """The staged loop (staging ring, `local_copy`, the turning K-major buffers) gives
    the unpipelined loop's results bit for bit on the interpreter."""
    before = _chain_kernel(fmt, False, a_column_major=True)
    after = clone_kernel(before)
    assert pipeline_loops(after, 3, 4, 90) == 1
    assert print_ir(after).count("local_copy") == 2
    M, N, K = 80, 48, 208
    rng = np.random.default_rng(11)
    a = np.asfortranarray(_random(fmt, (M, K), rng)[0])
    b = _random(fmt, (K, N), rng)[0]
    outs = []
    for kernel in (before, after):
        c = np.full((M, 64), -7, np.int32 if fmt == "i8" else np.float32)
        values = {"a_ptr": a, "b_ptr": b, "w_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K,
                  "sam": a.strides[0] // a.itemsize, "sak": a.strides[1] // a.itemsize, "sbk": N}
        execute(kernel, ((M + 63) // 64, 1, 1), [values[n] for n in kernel.arg_names])
        outs.append(c)
    assert not (outs[0] == -7).all()
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("capability", [80, 90])
def test_through_registers_four_rows_a_store(capability):
    """Where the copy goes through registers (a lone dot's staged B on sm_90a, sm_80's
    pipelined int8 loop: mma.sync's 8-bit slots are K-major too), each thread holds four
    K rows, so each shared store writes four transposed bytes."""
    if capability == 90:
        asm, _md = compile_kernel(_lone_kernel("fp8e5", 64, 128, 64), {"num_warps": 4}, 90)
    else:
        asm, _md = compile_kernel(_chain_kernel("i8", False, bm=128, bn=128, bk=64),
                                  {"num_warps": 4, "num_stages": 3}, 80)
    widths = _store_widths(asm["ptx"])
    assert widths["b8"] == widths["u8"] == 0 and widths["b32"] > 0
    assert "local_copy" not in asm["tgir"]
