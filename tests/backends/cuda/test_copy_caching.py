"""Which pipelined 16-byte `cp.async` copies go through L1 (`copy_caching`): those whose
rows likely start in the middle of a 32-byte sector (a row-major fp16 matrix with 3000
columns: its rows lie 6000 bytes apart), so that the sector one K block shares with the
next is fetched from L2 once. Rows a sector multiple apart (3008 columns) keep `.cg`, and
so does a copy whose contiguous runs are shorter than a sector. `TEGULA_CP_ASYNC_L1`
overrides the choice. The policy changes no result: the emulator runs the misaligned
case against float64."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.compiler import ASTSource
from tegula.ir.ops import Op
from tegula.passes.axis_analysis import axis_info
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, WRAP_N: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    if WRAP_N:  # the tutorial's `% N`: contiguity along N is then only known in runs of N's divisor
        rn_load = rn % N
    else:
        rn_load = rn
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + (rm % M)[:, None] * sam + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * sbk + rn_load[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn_load[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * sbk
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _kernel(stride_divisor, wrap_n=True):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "sam": "i32", "sbk": "i32", "scm": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "WRAP_N": "constexpr"}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16}
    attrs.update({n: stride_divisor for n in ("M", "N", "K", "sam", "sbk", "scm")})
    return optimized_ir(ASTSource(matmul, signature=sig, constexprs={"BM": 64, "BN": 64, "BK": 64, "WRAP_N": wrap_n},
                                  attrs=attrs))


def _copies(ptx):
    """(16-byte copies through L1, 16-byte copies around it)."""
    return (len(re.findall(r"cp\.async\.ca\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx)),
            len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)))


@pytest.mark.parametrize("capability", [80, 90])
def test_rows_off_a_sector_copy_through_l1(capability, monkeypatch):
    monkeypatch.delenv("TEGULA_CP_ASYNC_L1", raising=False)
    # a stride of 3000 halves (divisible by 8, not 16): A's K runs start mid-sector; B's
    # runs along N are known only 8 wide (16 bytes, under `% N`): no sector to share
    asm, _ = compile_kernel(_kernel(8), {"num_warps": 4, "num_stages": 3}, capability)
    through, around = _copies(asm["ptx"])
    assert through > 0 and around > 0
    assert through == around  # 64x64 fp16 tiles: the same number of copies each
    # 3008 halves (divisible by 16): every row starts where the base's sector does
    asm, _ = compile_kernel(_kernel(16), {"num_warps": 4, "num_stages": 3}, capability)
    assert _copies(asm["ptx"])[0] == 0


def test_long_runs_along_the_rows_of_b_go_through_l1_too(monkeypatch):
    monkeypatch.delenv("TEGULA_CP_ASYNC_L1", raising=False)
    asm, _ = compile_kernel(_kernel(8, wrap_n=False), {"num_warps": 4, "num_stages": 3}, 90)
    through, around = _copies(asm["ptx"])
    assert through > 0 and around == 0


@pytest.mark.parametrize("asked, expect", [("0", "none"), ("1", "all")])
def test_knob_overrides(asked, expect, monkeypatch):
    monkeypatch.setenv("TEGULA_CP_ASYNC_L1", asked)
    for divisor in (8, 16):
        through, around = _copies(compile_kernel(_kernel(divisor), {"num_warps": 4, "num_stages": 3}, 90)[0]["ptx"])
        assert (through == 0) if expect == "none" else (around == 0 and through > 0)


def test_likely_divisibility_raises_only_capped_arguments():
    kernel = _kernel(8)
    proved, likely = axis_info(kernel), axis_info(kernel, likely_divisibility=256)
    a_ptr, m = kernel.args[0], kernel.args[3]
    assert proved[a_ptr].divisibility == (16,) and likely[a_ptr].divisibility == (256,)
    # 8 is below the cap: exact, kept
    assert proved[m].divisibility == likely[m].divisibility == (8,)
    kernel = _kernel(16)
    assert axis_info(kernel, likely_divisibility=256)[kernel.args[3]].divisibility == (256,)


def test_8_bit_rows_at_the_cap_stay_around_l1(monkeypatch):
    """An fp8 matrix's row stride divisible by 16 is 16 bytes as far as the
    specialization knows, the same as a misaligned fp16 one's: not evidence."""
    monkeypatch.delenv("TEGULA_CP_ASYNC_L1", raising=False)
    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "sam": "i32", "sbk": "i32", "scm": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "WRAP_N": "constexpr"}
    attrs = {n: 16 for n, t in sig.items() if t != "constexpr"}
    kernel = optimized_ir(ASTSource(matmul, signature=sig, attrs=attrs,
                                    constexprs={"BM": 64, "BN": 64, "BK": 64, "WRAP_N": False}))
    through, around = _copies(compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, 90)[0]["ptx"])
    assert through == 0 and around > 0


def test_misaligned_rows_on_the_emulator():
    M, N, K = 72, 56, 200  # none a multiple of the 64-wide blocks; rows of 200 halves (divisible by 8)
    kernel = _kernel(8)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=3)
    assert any(i.op is Op.ASYNC_COPY for i in ek.lowering.kernel.walk())
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K, "sam": K, "sbk": N, "scm": N}
    ek.run((2, 1, 1), [values[n] for n in kernel.arg_names])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-2)
