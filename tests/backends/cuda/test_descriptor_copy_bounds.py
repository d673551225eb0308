"""Descriptors whose base, shape and strides the kernel loads from memory (Triton's
tutorial 08 builds one per group of a grouped GEMM) take the pointer path, made fast:
the descriptor's alignment rules are axis facts, so rows vectorize, and the mask along
the contiguous dimension (`k0 + j < K`, K unknown) becomes the source size of 16-byte
cp.async copies in the pipelined loop (`copy_bounds`). Checked on the host emulator at
capability 80 (mma.sync) and 90 (wgmma) against the interpreter and float64 numpy, on
ragged groups whose K is no multiple of 8 elements (77, 1000), fp16 and bf16, zero and
NaN padding; and the sm_90a / sm_80 PTX of tutorial 08's kernel (ptxas assembles it)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.ir.numpy_ops import bf16_bits_to_f32, f32_to_bf16_bits
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def grouped_desc_matmul(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_gemm_sizes, g_lds, group_size,
                        NUM_SM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        BF16: tl.constexpr, PAD: tl.constexpr):
    """Tutorial 08's `grouped_matmul_tma_kernel` (B given as [N, K], C in fp32)."""
    dtype = tl.bfloat16 if BF16 else tl.float16
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_n_tiles = tl.cdiv(gn, BN)
        num_tiles = tl.cdiv(gm, BM) * num_n_tiles
        if tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(dtype))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(dtype))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float32))
            a_desc = tl.make_tensor_descriptor(a_ptr, [gm, gk], [lda, 1], [BM, BK], padding_option=PAD)
            b_desc = tl.make_tensor_descriptor(b_ptr, [gn, gk], [ldb, 1], [BN, BK])
            c_desc = tl.make_tensor_descriptor(c_ptr, [gm, gn], [ldc, 1], [BM, BN])
            while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
                tile_in_gemm = tile_idx - last_problem_end
                offs_m = (tile_in_gemm // num_n_tiles) * BM
                offs_n = (tile_in_gemm % num_n_tiles) * BN
                acc = tl.zeros((BM, BN), dtype=tl.float32)
                for kk in range(0, tl.cdiv(gk, BK)):
                    a = a_desc.load([offs_m, kk * BK])
                    b = b_desc.load([offs_n, kk * BK])
                    acc += tl.dot(a, b.T)
                c_desc.store([offs_m, offs_n], acc)
                tile_idx += NUM_SM
        last_problem_end = last_problem_end + num_tiles


SIG = {"group_a_ptrs": "*u64", "group_b_ptrs": "*u64", "group_c_ptrs": "*u64", "group_gemm_sizes": "*i32",
       "g_lds": "*i32", "group_size": "i32", "NUM_SM": "constexpr", "BM": "constexpr", "BN": "constexpr",
       "BK": "constexpr", "BF16": "constexpr", "PAD": "constexpr"}
TABLES = {k: 16 for k in ("group_a_ptrs", "group_b_ptrs", "group_c_ptrs", "group_gemm_sizes", "g_lds")}
PROGRAMS = 3
# a cp.async whose source size is a register: `cp.async.cg.shared.global [..], [..], 16, %r..;`
CP_ASYNC_SRC_SIZE = re.compile(r"cp\.async\.cg\.shared\.global \[[^\]]*\], \[[^\]]*\], 16, %r\d+;")


def _constexprs(bm=64, bn=64, bk=32, bf16=False, pad="zero"):
    return {"NUM_SM": PROGRAMS, "BM": bm, "BN": bn, "BK": bk, "BF16": bf16, "PAD": pad}


def _kernel(**cx):
    return optimized_ir(ASTSource(grouped_desc_matmul, SIG, _constexprs(**cx), attrs=TABLES))


def _rows(rng, rows, cols, dtype):
    """A [rows, cols] matrix stored with rows padded to 16 bytes (a descriptor's stride
    rule), and its float64 values; the padding holds garbage that must not be read."""
    ld = -(-cols // 8) * 8
    x = rng.standard_normal((rows, ld)).astype(np.float32)
    x[:, cols:] = 1e4
    if dtype == "bf16":
        bits = f32_to_bf16_bits(x)
        return bits, bf16_bits_to_f32(bits).astype(np.float64)[:, :cols], ld
    x16 = x.astype(np.float16)
    return x16, x16.astype(np.float64)[:, :cols], ld


def _problem(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    A, B, C, want, sizes, lds = [], [], [], [], [], []
    for m, n, k in shapes:
        a, a64, lda = _rows(rng, m, k, dtype)
        b, b64, ldb = _rows(rng, n, k, dtype)
        ldc = -(-n // 4) * 4
        A.append(a), B.append(b), C.append(np.full((m, ldc), -3.0, np.float32))
        want.append(a64 @ b64.T)
        sizes += [m, n, k]
        lds += [lda, ldb, ldc]
    return A, B, C, want, np.array(sizes, np.int32), np.array(lds, np.int32)


def _args(A, B, C, sizes, lds):
    table = lambda xs: np.array([x.ctypes.data for x in xs], np.uint64)  # noqa: E731
    # the tables keep the arrays' addresses: the arrays must outlive the launch
    return [table(A), table(B), table(C), sizes, lds, len(A)]


def _check(C, want, shapes):
    for c, w, (m, n, _k) in zip(C, want, shapes):
        np.testing.assert_allclose(c[:, :n], w, rtol=2e-3, atol=2e-3)
        assert (c[:, n:] == -3.0).all()  # the store clipped at the group's N


RAGGED = [(70, 40, 77), (64, 96, 1000), (33, 130, 24)]


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_grouped_gemm_of_loaded_descriptors_matches_numpy_and_the_interpreter(capability, dtype):
    kernel = _kernel(bf16=dtype == "bf16")
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    copies = [i for i in ek.lowering.kernel.walk() if i.op is Op.ASYNC_COPY]
    assert copies and all(c.attrs.has_bound for c in copies)  # both operands: cp.async with a source size
    assert Op.TMA_LOAD not in {i.op for i in ek.lowering.kernel.walk()}
    assert [c.version for c in ek.plan.mma.values()] == [3 if capability == 90 else 2]
    A, B, C, want, sizes, lds = _problem(RAGGED, dtype, seed=capability + len(dtype))
    ek.run((PROGRAMS, 1, 1), _args(A, B, C, sizes, lds))
    _check(C, want, RAGGED)
    ref = [np.full_like(c, -3.0) for c in C]
    execute(kernel, (PROGRAMS, 1, 1), _args(A, B, ref, sizes, lds))
    for c, r in zip(C, ref):
        np.testing.assert_allclose(c, r, rtol=2e-3, atol=2e-3)


def test_nan_padding_still_reads_nan_past_k():
    """A "nan" descriptor's loads are not pipelined (cp.async fills zeros): its blocks
    past K read NaN, so every output of a group whose K is no multiple of BK is NaN."""
    shapes = [(40, 24, 77), (16, 8, 64)]
    kernel = _kernel(pad="nan")
    A, B, C, want, sizes, lds = _problem(shapes, "fp16", seed=1)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    ek.run((PROGRAMS, 1, 1), _args(A, B, C, sizes, lds))
    assert np.isnan(C[0][:, :24]).all()
    np.testing.assert_allclose(C[1][:, :8], want[1], rtol=2e-3, atol=2e-3)


def _compile(capability, bm=128, bn=128, bk=64, stages=3, warps=4):
    cx = _constexprs(bm, bn, bk)
    return tegula.compile(ASTSource(grouped_desc_matmul, SIG, cx, attrs=TABLES),
                          target=GPUTarget("cuda", capability, 32), options={"num_warps": warps, "num_stages": stages})


@pytest.mark.parametrize("capability, tensor_op", [(90, "wgmma.mma_async"), (80, "mma.sync")])
def test_tutorial08_kernel_is_cp_async_pipelined(capability, tensor_op):
    ck = _compile(capability)
    ptx = ck.asm["ptx"]
    assert tensor_op in ptx
    # A and B copies, in the prologue and the loop, all 16 bytes wide with a source size
    assert len(CP_ASYNC_SRC_SIZE.findall(ptx)) >= 2 * 2
    assert "ld.global.b16" not in ptx and "ld.global.nc.b16" not in ptx
    if find_ptxas() is None:
        pytest.skip("ptxas not found")
    assert ck.asm["cubin"][:4] == b"\x7fELF"
