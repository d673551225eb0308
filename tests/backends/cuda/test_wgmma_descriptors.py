"""wgmma matrix descriptors reach ptxas with a constant high word.

A descriptor is the operand's shared start address >> 4 (bits 0-13) plus constant
fields (the leading and stride byte offsets, the swizzle mode): where a sub-tile's
offset depends on the thread's warpgroup, `lower_wgmma` sums it and the start in 32
bits, widens, then adds the fields (a constant offset is part of the added constant).
Summed in 64 bits instead (`zext(start) + zext(offset) + fields`), ptxas 12.8 and 13.0 both dropped
the computation of the high word of the later K steps' B descriptors in flash-linear-
attention's `chunk_fwd_kernel_o` (two dots sharing A, B split over two warpgroups along
N): those wgmmas read an uninitialized uniform register as their stride and swizzle
fields, and the H200 stopped with an illegal address (an out-of-range shared address)
whenever an earlier kernel had left a bad value in it. The kernel below has that shape;
its PTX must define every descriptor as a zero-extended 32-bit value plus a constant,
and it must compute the right numbers on the emulator."""
from __future__ import annotations

import re

import numpy as np
import pytest
from gpu_runner import has_torch_gpu

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def two_dots_one_a(q_ptr, k_ptr, h_ptr, o_ptr, s_ptr, T, K: tl.constexpr, V: tl.constexpr,
                   BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """o = q @ h and s = q @ k^T over K blocks (k stored row by row, read K-major)."""
    rows = tl.arange(0, BT)
    cols = tl.arange(0, BV)
    o = tl.zeros([BT, BV], dtype=tl.float32)
    s = tl.zeros([BT, BT], dtype=tl.float32)
    for i in range(tl.cdiv(K, BK)):
        ks = i * BK + tl.arange(0, BK)
        q = tl.load(q_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < T) & (ks[None, :] < K), other=0.0)
        kt = tl.load(k_ptr + ks[:, None] + rows[None, :] * K, mask=(ks[:, None] < K) & (rows[None, :] < T), other=0.0)
        h = tl.load(h_ptr + ks[:, None] * V + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < V), other=0.0)
        o += tl.dot(q, h)
        s += tl.dot(q, kt)
    tl.store(o_ptr + rows[:, None] * V + cols[None, :], o, mask=(rows[:, None] < T) & (cols[None, :] < V))
    tl.store(s_ptr + rows[:, None] * BT + rows[None, :], s, mask=(rows[:, None] < T) & (rows[None, :] < T))


SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "h_ptr": "*fp16", "o_ptr": "*fp32", "s_ptr": "*fp32", "T": "i32",
       "K": "constexpr", "V": "constexpr", "BT": "constexpr", "BK": "constexpr", "BV": "constexpr"}
# fla's failing configuration was K = V = 64 in blocks of 128, 64 rows, 8 warps, 3
# stages; a single-iteration loop is no longer pipelined (`pipeline_loops`: its operands
# then come from registers), so K = 192 here: two iterations, the second half masked,
# both through the rings whose descriptors this is about
CONSTS = {"K": 192, "V": 64, "BT": 64, "BK": 128, "BV": 128}
ATTRS = {p: 16 for p in ("q_ptr", "k_ptr", "h_ptr", "o_ptr", "s_ptr")}


def _source():
    return ASTSource(two_dots_one_a, SIG, CONSTS, attrs=ATTRS)


def _definitions(ptx: str) -> dict[str, tuple[str, list[str]]]:
    """register -> (opcode, operands) of its (single, SSA) definition."""
    out = {}
    for m in re.finditer(r"^\s*([a-z][\w.]*)\s+(%rd\d+),\s*([^;]*);", ptx, re.M):
        out[m.group(2)] = (m.group(1), [o.strip() for o in m.group(3).split(",")])
    return out


def test_wgmma_descriptors_have_a_constant_high_word():
    ck = tegula.compile(_source(), target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
    ptx = ck.asm["ptx"]
    defs = _definitions(ptx)
    descriptors = set()
    for m in re.finditer(r"wgmma\.mma_async[^{]*\{[^}]*\},\s*(%rd\d+),\s*(%rd\d+)", ptx):
        descriptors.update(m.groups())
    assert len(descriptors) >= 8, "the kernel's dots should run on wgmma with A and B in shared memory"
    for d in sorted(descriptors):
        op, args = defs[d]
        assert op in ("or.b64", "add.s64") and re.fullmatch(r"-?\d+", args[1]), (d, op, args)
        start_op, _ = defs[args[0]]
        # the start + offset sum: a 32-bit value, zero-extended (its high word is zero)
        assert start_op == "cvt.u64.u32", (d, args[0], start_op)


@pytest.mark.parametrize("capability", [80, 90])
def test_two_dots_one_a_on_the_emulator(capability):
    rng = np.random.default_rng(27)
    T, K, V, BT = 63, CONSTS["K"], CONSTS["V"], CONSTS["BT"]
    q = rng.standard_normal((T, K)).astype(np.float16)
    k = rng.standard_normal((T, K)).astype(np.float16)
    h = (rng.standard_normal((K, V)) * 0.5).astype(np.float16)
    o = np.full((T, V), np.nan, np.float32)
    s = np.full((BT, BT), np.nan, np.float32)
    ek = EmulatedKernel(optimized_ir(_source()), 8, capability=capability, num_stages=3)
    ek.run((1, 1, 1), [q, k, h, o, s, T])
    q64, k64, h64 = (x.astype(np.float64) for x in (q, k, h))
    np.testing.assert_allclose(o, q64 @ h64, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(s[:T, :T], q64 @ k64.T, rtol=1e-3, atol=1e-3)


@pytest.mark.skipif(not has_torch_gpu(), reason="no CUDA GPU")
def test_two_dots_one_a_on_the_gpu():
    import torch
    gen = torch.Generator(device="cuda").manual_seed(27)
    T, K, V, BT = 63, CONSTS["K"], CONSTS["V"], CONSTS["BT"]
    q, k = (torch.randn(T, K, device="cuda", generator=gen).half() for _ in range(2))
    h = (torch.randn(K, V, device="cuda", generator=gen) * 0.5).half()
    o = torch.full((T, V), float("nan"), device="cuda")
    s = torch.full((BT, BT), float("nan"), device="cuda")
    for _ in range(3):  # launched again after other kernels ran on the SMs
        two_dots_one_a[(1,)](q, k, h, o, s, T, num_warps=8, num_stages=3, **CONSTS)
        torch.cuda.synchronize()
        torch.testing.assert_close(o.double(), q.double() @ h.double(), rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(s[:T, :T].double(), q.double() @ k.double().T, rtol=1e-3, atol=1e-3)
        torch.randn(1 << 20, device="cuda").sum()
