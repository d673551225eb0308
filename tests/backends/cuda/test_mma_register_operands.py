"""mma.sync operands converted in registers (`lower_mma.register_fragments`): a dot whose
operand is an earlier dot's accumulator on the same warps reads its fragments from
registers (renamed, or by in-warp shuffles for tf32) instead of storing the operand to
shared memory, a barrier and `ldmatrix`. The shape of the case: flash-linear-attention's
`chunk_gated_delta_rule_fwd_kkt_solve_kernel`, whose block merge chains 16x16 tf32 dots
on one warp (`-dot(dot(Ai11, A10), Ai00)`). Checked on the emulator at capability 80 and
90 against float64 products (tf32 tolerance; fresh random inputs), on the PTX (no
scratch for those operands; the knob off stages them as before; ptxas assembles it),
and on the GPU where there is one."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_runner import has_torch_gpu
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.config import knobs
from tegula.ir.ops import Op


@tegula.jit
def block_merge(a_ptr, b_ptr, c_ptr, out_ptr, N: tl.constexpr):
    """out = -dot(dot(A, B), C) then dot(out^T-free chain): A's product with B is the next
    dot's A, and the result is the B of a third dot, in tf32."""
    r = tl.arange(0, N)
    offs = r[:, None] * N + r[None, :]
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    c = tl.load(c_ptr + offs)
    ab = tl.dot(a, b, input_precision="tf32")
    abc = -tl.dot(ab, c, input_precision="tf32")
    out = tl.dot(c, abc, input_precision="tf32") + tl.dot(tl.trans(ab), a, input_precision="tf32")
    tl.store(out_ptr + offs, out)


def _kernel(n):
    return tir_opt(block_merge, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "out_ptr": "*fp32",
                                 "N": "constexpr"}, {"N": n}, num_stages=1,
                   attrs={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "out_ptr": 16})


def _want(a, b, c):
    a, b, c = (x.astype(np.float64) for x in (a, b, c))
    ab = a @ b
    return c @ -(ab @ c) + ab.T @ a


def _dot_scratch(tgir: str) -> list[str]:
    return [ln.strip()[:80] for ln in tgir.splitlines() if " = dot " in ln and "smem(" in ln]


@pytest.mark.parametrize("num_warps", [1, 2, 4])
@pytest.mark.parametrize("capability", [80, 90])
def test_chained_tf32_dots_on_the_emulator(num_warps, capability):
    n = 16 if num_warps == 1 else 32
    kernel = _kernel(n)
    rng = np.random.default_rng(num_warps * 100 + capability)
    a, b, c = (rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(3))
    out = np.full((n, n), np.nan, np.float32)
    EmulatedKernel(kernel, num_warps, capability=capability, num_stages=1).run((1, 1, 1), [a, b, c, out])
    want = _want(a, b, c)
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-2 * np.abs(want).max())


def test_accumulators_feed_the_next_dots_in_registers(monkeypatch):
    """On one warp only the loaded operands of the first dots are staged (the loads'
    layout is not a fragment's); every operand that is an accumulator goes in registers.
    With the knob off, they are staged through the dots' scratch as before."""
    kernel = _kernel(16)
    asm = compile_kernel(kernel, {"num_warps": 1, "num_stages": 1}, 90)[0]
    staged = _dot_scratch(asm["tgir"])
    # dot(a, b): both loaded; dot(ab, c): c loaded; dot(c, abc): c loaded;
    # dot(trans(ab), a): a loaded — 4 dots with scratch, each for its loaded operands only
    assert len(staged) == 4, staged
    sizes = sorted(int(ln.split("smem(")[1].split(",")[1].split(")")[0]) for ln in staged)
    assert sizes == [1024, 1024, 1024, 2048], sizes
    if find_ptxas() is not None:
        assert asm.get("cubin")
    monkeypatch.setattr(knobs, "mma_register_operands", False)
    off = compile_kernel(kernel, {"num_warps": 1, "num_stages": 1}, 90)[0]
    assert sorted(int(ln.split("smem(")[1].split(",")[1].split(")")[0]) for ln in _dot_scratch(off["tgir"])) \
        == [2048] * 4


@pytest.mark.skipif(not has_torch_gpu(), reason="no CUDA GPU")
@pytest.mark.parametrize("num_warps", [1, 4])
def test_chained_tf32_dots_on_the_gpu(num_warps):
    import torch

    n = 16 if num_warps == 1 else 64
    g = torch.Generator().manual_seed(num_warps)
    a, b, c = (torch.empty(n, n).uniform_(-1, 1, generator=g).cuda() for _ in range(3))
    out = torch.full((n, n), float("nan"), device="cuda")
    block_merge[(1,)](a, b, c, out, N=n, num_warps=num_warps)
    want = _want(*(x.cpu().numpy() for x in (a, b, c)))
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=0, atol=2e-2 * np.abs(want).max())


@tegula.jit
def key_grams(k_ptr, out_ptr, BC: tl.constexpr, BK: tl.constexpr):
    """fla's kkt (`chunk_gated_delta_rule_fwd_kkt_solve_kernel`): each key block is the
    A of its own products and, transposed, the B of the later blocks'."""
    o_i, o_k = tl.arange(0, BC), tl.arange(0, BK)
    k0 = tl.load(k_ptr + o_i[:, None] * BK + o_k[None, :])
    k1 = tl.load(k_ptr + (BC + o_i)[:, None] * BK + o_k[None, :])
    offs = o_i[:, None] * BC + o_i[None, :]
    tl.store(out_ptr + offs, tl.dot(k0, tl.trans(k0)))
    tl.store(out_ptr + BC * BC + offs, tl.dot(k1, tl.trans(k0)))
    tl.store(out_ptr + 2 * BC * BC + offs, tl.dot(k1, tl.trans(k1)))


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("capability", [80, 90])
def test_a_block_read_by_several_dots_is_converted_once(num_warps, capability):
    """On one warp each key block goes to its fragment layout once (one conversion
    through shared memory, shared by its three reads), where each dot staged both its
    operands; the transposed block is the same registers renamed. (With warps split
    over both M and N, a block's A and its transpose's B fragments sit in different
    warps: staged per dot as before.)"""
    BC, BK = (16, 64) if num_warps == 1 else (64, 32)
    kernel = tir_opt(key_grams, {"k_ptr": "*fp16", "out_ptr": "*fp32", "BC": "constexpr", "BK": "constexpr"},
                     {"BC": BC, "BK": BK}, num_stages=1, attrs={"k_ptr": 16, "out_ptr": 16})
    tgir = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 1}, capability)[0]["tgir"]
    if num_warps == 1:
        assert not _dot_scratch(tgir), _dot_scratch(tgir)
        moved = [ln for ln in tgir.splitlines() if "convert_layout" in ln and "smem(" in ln and f"<{BC}x{BK}x" in ln]
        assert len(moved) == 2, moved
    rng = np.random.default_rng(num_warps * 10 + capability)
    k = rng.integers(-3, 4, (2 * BC, BK)).astype(np.float16)
    out = np.full((3, BC, BC), np.nan, np.float32)
    EmulatedKernel(kernel, num_warps, capability=capability, num_stages=1).run((1, 1, 1), [k, out])
    k0, k1 = k[:BC].astype(np.float64), k[BC:].astype(np.float64)
    np.testing.assert_array_equal(out, np.stack([k0 @ k0.T, k1 @ k0.T, k1 @ k1.T]))


@tegula.jit
def tile_read_by_both_kinds(x_ptr, y_ptr, z_ptr, w_ptr, out_ptr):
    """x [64, 32] is B of two 16-row dots (mma.sync) and register A of a 64-row dot
    (wgmma on sm_90a with 4 warps)."""
    r16, r32, r64 = tl.arange(0, 16), tl.arange(0, 32), tl.arange(0, 64)
    x = tl.load(x_ptr + r64[:, None] * 32 + r32[None, :])
    y = tl.load(y_ptr + r16[:, None] * 64 + r64[None, :])
    z = tl.load(z_ptr + r16[:, None] * 64 + r64[None, :])
    w = tl.load(w_ptr + r32[:, None] * 64 + r64[None, :])
    tl.store(out_ptr + r16[:, None] * 32 + r32[None, :], tl.dot(y, x))
    tl.store(out_ptr + 512 + r16[:, None] * 32 + r32[None, :], tl.dot(z, x))
    tl.store(out_ptr + 1024 + r64[:, None] * 64 + r64[None, :], tl.dot(x, w))


def test_a_tile_read_by_mma_sync_and_wgmma_dots():
    """The mma.sync dots share x's fragment conversion; the wgmma dot still gets x in
    its own register-A layout."""
    sig = {p: "*fp16" for p in ("x_ptr", "y_ptr", "z_ptr", "w_ptr")} | {"out_ptr": "*fp32"}
    kernel = tir_opt(tile_read_by_both_kinds, sig, {}, num_stages=1, attrs={p: 16 for p in sig})
    rng = np.random.default_rng(5)
    x, y, z, w = (rng.integers(-3, 4, s).astype(np.float16) for s in ((64, 32), (16, 64), (16, 64), (32, 64)))
    out = np.full(1024 + 64 * 64, np.nan, np.float32)
    ek = EmulatedKernel(kernel, 4, capability=90, num_stages=1)
    assert sorted(ek.plan.mma[d].version for d in ek.lowering.kernel.walk() if d.op is Op.DOT) == [2, 2, 3]
    ek.run((1, 1, 1), [x, y, z, w, out])
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    np.testing.assert_array_equal(out[:512].reshape(16, 32), y.astype(np.float64) @ x64)
    np.testing.assert_array_equal(out[512:1024].reshape(16, 32), z.astype(np.float64) @ x64)
    np.testing.assert_array_equal(out[1024:].reshape(64, 64), x64 @ w64)
