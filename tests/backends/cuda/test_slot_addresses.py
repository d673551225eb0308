"""A thread's accesses to a swizzled slot share one base register: the register part of
an element's offset that the thread part leaves clear is added after the slot's base
(`KernelLowering.element_byte_offset`), so ptxas folds it into each access's immediate.
Added before the base, LLVM rewrote it into an `or` that the base could not fold: the B
slot of a 128x128x64 matmul took a base register per copy and an IMAD each per
iteration (0.91x Triton's time per K step on an H200; 0.96-0.98x with one base)."""
from __future__ import annotations

import re

import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * sbk
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(tl.float16))


def _loop_copy_bases(ptx):
    """The registers the loop's cp.async destinations are computed from (`add.s32 dst,
    base, imm`, or the destination itself when it is used as is)."""
    body = re.search(r"\$L__BB0_(\d+):.*?bra(?:\.uni)?\s+\$L__BB0_\1;", ptx, re.S).group(0)
    defs = dict(re.findall(r"add\.s32\s+(%r\d+), (%r\d+), -?\d+;", body))
    dsts = re.findall(r"cp\.async\.c[ag]\.shared\.global \[(%r\d+)\]", body)
    assert dsts
    return {defs.get(d, d) for d in dsts}


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("bn, warps", [(128, 4), (256, 8)])
def test_a_threads_slot_copies_share_a_base(capability, bn, warps):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "sam": "i32", "sbk": "i32", "scm": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    kernel = optimized_ir(ASTSource(matmul, signature=sig, constexprs={"BM": 128, "BN": bn, "BK": 64},
                                    attrs={n: 16 for n, t in sig.items() if t != "constexpr"}))
    asm, _ = compile_kernel(kernel, {"num_warps": warps, "num_stages": 3}, capability)
    # one base for A's slot and one for B's (16 copies a thread at 128x128 over 4 warps)
    assert len(_loop_copy_bases(asm["ptx"])) <= 2
