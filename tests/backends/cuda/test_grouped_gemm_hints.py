"""Triton's grouped GEMM (tutorial 08) on sm_90a: the operands' pointers are built from
pointers and strides loaded from tables, so nothing is known of their alignment, and the
kernel says `tl.multiple_of(a_ptrs, [16, 16])` at the top of its K loop with the result
discarded. Hints apply in place (as in Triton), so the loop is pipelined onto 16-byte
cp.async copies feeding wgmma; without the hint the copies fall back to 2-byte loads.
Compiled ahead of time (no GPU); ptxas assembles the PTX where it is found."""
from __future__ import annotations

import re

import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.ir.parser import parse_ir
from tegula.ir.printer import print_ir
from tegula.runtime.source import ASTSource


@tegula.jit
def grouped_matmul(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_gemm_sizes, g_lds, group_size,
                   NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                   BLOCK_SIZE_K: tl.constexpr, HINT: tl.constexpr):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = tl.cdiv(gm, BLOCK_SIZE_M) * num_n_tiles
        while (tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles):
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            tile_in_gemm = tile_idx - last_problem_end
            tile_m = tile_in_gemm // num_n_tiles
            tile_n = tile_in_gemm % num_n_tiles
            offs_am = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(gk, BLOCK_SIZE_K)):
                if HINT:
                    tl.multiple_of(a_ptrs, [16, 16])
                    tl.multiple_of(b_ptrs, [16, 16])
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                acc += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c_ptrs = c_ptr + ldc * offs_am[:, None] + offs_bn[None, :]
            tl.store(c_ptrs, acc.to(tl.float16))
            tile_idx += NUM_SM
        last_problem_end = last_problem_end + num_tiles


SIGNATURE = {"group_a_ptrs": "*u64", "group_b_ptrs": "*u64", "group_c_ptrs": "*u64",
             "group_gemm_sizes": "*i32", "g_lds": "*i32", "group_size": "i32"}
# a 16-byte cp.async: `cp.async.cg.shared.global [dst], [src], 16, src_size;`
CP_ASYNC_16 = re.compile(r"cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)? \[[^\]]*\], \[[^\]]*\], 16\b")


def _compile(hint: bool):
    constexprs = {"NUM_SM": 132, "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64,
                  "HINT": hint}
    src = ASTSource(grouped_matmul, {**SIGNATURE, **{k: "constexpr" for k in constexprs}}, constexprs)
    return tegula.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})


def test_discarded_hints_pipeline_the_pointer_table_gemm_onto_cp_async_and_wgmma():
    compiled = _compile(hint=True)
    ptx = compiled.asm["ptx"]
    assert ".target sm_90a" in ptx
    assert "wgmma.mma_async" in ptx
    assert len(CP_ASYNC_16.findall(ptx)) >= 2 * 2  # both operands, in the loop and its prologue
    assert "ld.global.b16" not in ptx  # no operand element is loaded on its own
    # the kept hints (results unused) are in the GPU stage, whose text reads back
    tgir = compiled.asm["tgir"]
    assert "= hint " in tgir and print_ir(parse_ir(tgir), locs=True) == tgir
    if find_ptxas() is None:
        pytest.skip("ptxas not found")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_without_the_hint_the_copies_are_not_16_byte_aligned():
    ptx = _compile(hint=False).asm["ptx"]
    assert not CP_ASYNC_16.search(ptx)
    assert "ld.global.b16" in ptx
