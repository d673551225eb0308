"""fp8 dots on `mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}` (sm_89+, PTX ISA 8.4),
int8's fragments: on sm_89 (Ada, no wgmma), and on sm_90a where wgmma does not apply
(`TEGULA_WGMMA=0`). Before, such dots fell to FMAs (20.8 TFLOP/s at 8192^3 on an H200
with the knob off). Checked on the emulator against float64 products (exact in f32
with K this small), and the PTX assembles, declaring `.version 8.4` only when an fp8
mma.sync is in it; sm_80 keeps FMAs (`test_fp8_row_major_b.test_sm80_unchanged`)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_fp8_row_major_b import _chain_kernel, _check, _lone_kernel, _random, _to_8bit

from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas

FP8 = ["fp8e4nv", "fp8e5"]


@pytest.fixture
def no_wgmma(monkeypatch):
    monkeypatch.setenv("TEGULA_WGMMA", "0")


def _run_chain(fmt, a_column_major, chain, num_warps, capability, seed):
    kernel = _chain_kernel(fmt, chain, a_column_major)
    ek = EmulatedKernel(kernel, num_warps, capability=capability, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [2] * (1 + chain)
    assert {c.ab_type for c in ek.plan.mma.values()} == {"e4m3" if fmt == "fp8e4nv" else "e5m2"}
    M, N, K = 112, 48, 176  # none a multiple of the 64-blocks (masked)
    rng = np.random.default_rng(seed)
    a, a64 = _random(fmt, (M, K), rng)
    if a_column_major:
        a = np.asfortranarray(a)
    b, b64 = _random(fmt, (K, N), rng)
    w, w64 = _random(fmt, (64, 64), rng)
    c = np.full((M, 64), np.nan, np.float32)
    values = {"a_ptr": a, "b_ptr": b, "w_ptr": w, "c_ptr": c, "M": M, "N": N, "K": K,
              "sam": a.strides[0] // a.itemsize, "sak": a.strides[1] // a.itemsize, "sbk": N}
    ek.run(((M + 63) // 64, 1, 1), [values[n] for n in kernel.arg_names])
    want = a64 @ b64
    if chain:  # the accumulator cast back to fp8 and multiplied again
        full = np.zeros((M, 64))
        full[:, :N] = want
        want = (_to_8bit(fmt, full) @ w64)[:, :N]
    _check(fmt, c[:, :N], want)


@pytest.mark.parametrize("fmt, a_column_major, chain, num_warps",
                         [("fp8e4nv", False, False, 4), ("fp8e5", False, False, 8), ("fp8e4nv", True, True, 8),
                          ("fp8e5", True, False, 4)],
                         ids=["e4m3-a_row-loop-w4", "e5m2-a_row-loop-w8", "e4m3-a_col-chain-w8", "e5m2-a_col-loop-w4"])
def test_fp8_dot_on_mma_sync_sm89(fmt, a_column_major, chain, num_warps):
    _run_chain(fmt, a_column_major, chain, num_warps, 89, hash((fmt, a_column_major, chain, num_warps)) % 2**32)


def test_fp8_dot_on_mma_sync_sm90_without_wgmma(no_wgmma):
    _run_chain("fp8e5", False, True, 4, 90, 11)


@pytest.mark.parametrize("fmt", ["fp8e4nv"])
def test_fp8_lone_dot_sm89(fmt):
    kernel = _lone_kernel(fmt)
    ek = EmulatedKernel(kernel, 4, capability=89, num_stages=3)
    assert [c.version for c in ek.plan.mma.values()] == [2]
    rng = np.random.default_rng(7)
    a, a64 = _random(fmt, (64, 64), rng)
    b, b64 = _random(fmt, (64, 64), rng)
    c = np.full((64, 64), np.nan, np.float32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    _check(fmt, c, a64 @ b64)


def _version(ptx: str) -> str:
    return re.search(r"^\.version (\S+)", ptx, re.M).group(1)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("capability", [89, 90])
@pytest.mark.parametrize("fmt, ab", [("fp8e4nv", "e4m3"), ("fp8e5", "e5m2")])
def test_fp8_mma_sync_ptx_assembles(fmt, ab, capability, no_wgmma):
    asm, _md = compile_kernel(_chain_kernel(fmt, False, bm=128, bn=128, bk=64), {"num_warps": 4, "num_stages": 3},
                              capability)
    assert f"mma.sync.aligned.m16n8k32.row.col.f32.{ab}.{ab}.f32" in asm["ptx"] and "cubin" in asm
    assert _version(asm["ptx"]) == "8.4"


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_only_fp8_mma_sync_raises_the_ptx_version():
    """Other kernels keep the oldest PTX ISA that has what they use, so a driver that
    JIT-compiles their PTX (no ptxas installed) may be older."""
    asm, _md = compile_kernel(_chain_kernel("i8", False), {"num_warps": 4, "num_stages": 3}, 89)
    assert "m16n8k32.row.col.satfinite.s32.s8.s8.s32" in asm["ptx"] and _version(asm["ptx"]) == "8.0"
    asm, _md = compile_kernel(_chain_kernel("fp8e5", False), {"num_warps": 4, "num_stages": 3}, 90)
    assert "wgmma.mma_async" in asm["ptx"] and _version(asm["ptx"]) == "8.0"


def _gpu_capability():
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_capability() if torch.cuda.is_available() else None


@pytest.mark.skipif(not (_gpu_capability() or (0,)) >= (8, 9), reason="needs a CUDA GPU of sm_89 or newer")
@pytest.mark.parametrize("chain", [False, True], ids=["loop", "chain"])
@pytest.mark.parametrize("fmt", FP8)
def test_fp8_mma_sync_on_the_gpu(fmt, chain, no_wgmma):
    """The same kernel launched on the GPU with wgmma off (a fresh JIT object: the knob
    is part of the compile cache's key), against float64 products of the fp8 values."""
    import torch
    from test_fp8_row_major_b import matmul_chain

    import tegula
    import tegula.language as tl

    kernel = tegula.jit(matmul_chain.fn)
    dtype = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}[fmt]
    M, N, K = 200, 64, 328  # M and K not multiples of the blocks
    gen = torch.Generator(device="cuda").manual_seed(3 + chain)
    a = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
    b = torch.randn(K, N, device="cuda", generator=gen).to(dtype)
    w = torch.randn(N, N, device="cuda", generator=gen).to(dtype)
    c = torch.full((M, N), float("nan"), device="cuda")
    compiled = kernel[((M + 63) // 64,)](a, b, w, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), 1,
                                         BM=64, BN=64, BK=64, CHAIN=chain, ACC=tl.float32, num_warps=4,
                                         num_stages=3)
    want = a.double() @ b.double()
    if chain:
        want = want.float().to(dtype).double() @ w.double()
    torch.testing.assert_close(c.double(), want, rtol=1e-4, atol=1e-3)
    assert f"m16n8k32.row.col.f32.{'e4m3' if fmt == 'fp8e4nv' else 'e5m2'}" in compiled.asm["ptx"]
