"""wgmma with B computed in registers (sm_90a): the lowering stores B into the dot's
scratch in the NVMMA layout (by stmatrix where B is in an accumulator's layout;
fence.proxy.async, barrier) and runs wgmma on it, as
Triton does, where B used to keep the dot on mma.sync. The shapes are
flash-linear-attention's: a loaded tile scaled before the dot (`dot(k, v * exp(g))`),
and a loop-carried state read as B (`dot(q, h)`, `h += dot(k^T, v)`). Checked on the
emulator at capability 90 (and 80, the mma.sync path, for the same numbers) against
float64 products, with sequence lengths that are not multiples of the block, 4 and 8
warps; the PTX assembles for sm_90a; `TEGULA_WGMMA_REGISTER_B=0` keeps mma.sync; GPU
where there is one."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_runner import has_torch_gpu
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.compiler import ASTSource
from tegula.config import knobs
from tegula.ir.core import ArgAttrs
from tegula.ir.ops import Op


@tegula.jit
def state_recurrence(q_ptr, k_ptr, v_ptr, g_ptr, o_ptr, h_ptr, T, K: tl.constexpr, V: tl.constexpr,
                     BT: tl.constexpr):
    """Per chunk of BT rows: o = q @ h (h, the carried state, as B), then
    h = h * exp(g_last) + k^T @ (v * exp(g_last - g)) (v scaled in registers, as B)."""
    rk, rv = tl.arange(0, K), tl.arange(0, V)
    h = tl.zeros((K, V), dtype=tl.float32)
    for t in range(0, T, BT):
        rt = t + tl.arange(0, BT)
        live = rt < T
        q = tl.load(q_ptr + rt[:, None] * K + rk[None, :], mask=live[:, None], other=0.0)
        o = tl.dot(q, h.to(tl.float16))
        tl.store(o_ptr + rt[:, None] * V + rv[None, :], o, mask=live[:, None])
        kt = tl.load(k_ptr + rt[None, :] * K + rk[:, None], mask=live[None, :], other=0.0)
        g = tl.load(g_ptr + rt, mask=live, other=0.0)
        g_last = tl.load(g_ptr + tl.minimum(t + BT, T) - 1)
        v = tl.load(v_ptr + rt[:, None] * V + rv[None, :], mask=live[:, None], other=0.0)
        v = (v * tl.exp(g_last - g)[:, None]).to(tl.float16)
        h = h * tl.exp(g_last) + tl.dot(kt, v)
    tl.store(h_ptr + rk[:, None] * V + rv[None, :], h)


SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "g_ptr": "*fp32", "o_ptr": "*fp32",
       "h_ptr": "*fp32", "T": "i32", "K": "constexpr", "V": "constexpr", "BT": "constexpr"}
# T's divisor exact, as a launch measures it (no alignment version)
ALIGNED = {**{n: 16 for n in SIG if SIG[n] != "constexpr" and n != "T"}, "T": ArgAttrs(1, exact_divisibility=True)}


def recurrence_ir(K=64, V=64, BT=64):
    return tir_opt(state_recurrence, SIG, {"K": K, "V": V, "BT": BT}, attrs=ALIGNED)


def inputs(T, K, V, rng):
    q, k, v = (rng.standard_normal((T, d)).astype(np.float16) * 0.5 for d in (K, K, V))
    g = -np.cumsum(rng.uniform(0.0, 0.05, T)).astype(np.float32)
    return q, k, v, g


def reference(q, k, v, g, BT):
    """The kernel's recurrence in float64, rounding where the kernel rounds to f16."""
    T, K, V = q.shape[0], q.shape[1], v.shape[1]
    h = np.zeros((K, V))
    o = np.zeros((T, V))
    for t in range(0, T, BT):
        s = slice(t, min(t + BT, T))
        o[s] = q[s].astype(np.float64) @ h.astype(np.float16).astype(np.float64)
        g_last = float(g[s][-1])
        vs = (v[s].astype(np.float32) * np.exp(np.float32(g_last) - g[s])[:, None]).astype(np.float16)
        h = h * np.exp(g_last) + k[s].astype(np.float64).T @ vs.astype(np.float64)
    return o, h


def dot_versions(kernel):
    return [str(ins.results[0].type.encoding) for ins in kernel.walk() if ins.op is Op.DOT]


@pytest.mark.parametrize("num_warps", [4, 8])
@pytest.mark.parametrize("capability", [80, 90])
def test_register_b_on_the_emulator(num_warps, capability):
    kernel = recurrence_ir()
    ek = EmulatedKernel(kernel, num_warps, capability=capability, num_stages=2)
    versions = dot_versions(ek.lowering.kernel)
    assert len(versions) == 2 and all(("version=3" in v) == (capability == 90) for v in versions), versions
    T = 150
    q, k, v, g = inputs(T, 64, 64, np.random.default_rng(num_warps + capability))
    o = np.full((T, 64), np.nan, np.float32)
    h = np.full((64, 64), np.nan, np.float32)
    ek.run((1, 1, 1), [q, k, v, g, o, h, T])
    want_o, want_h = reference(q, k, v, g, 64)
    np.testing.assert_allclose(o, want_o, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(h, want_h, rtol=2e-3, atol=2e-3)


def test_scaled_operand_loads_are_prefetched():
    """The 2-D loads of the dot loop that reach their dots through register math (v,
    scaled) are prefetched through rings like the dot operands, and read back in the
    layout their copies wrote (16-byte reads, not the default's 2 bytes)."""
    ek = EmulatedKernel(recurrence_ir(), 4, capability=90, num_stages=3)
    loop = next(i for i in ek.lowering.kernel.walk() if i.op is Op.FOR)
    body = list(loop.regions[0].walk())
    assert [i for i in body if i.op is Op.LOAD and len(getattr(i.results[0].type, "shape", ())) == 2] == []
    copies = {i.operands[0]: i for i in ek.lowering.kernel.walk() if i.op is Op.ASYNC_COPY}
    read_back = [i for i in body if i.op is Op.LOCAL_LOAD and len(i.results[0].type.shape) == 2
                 and "spt=[1, 8]" in str(i.results[0].type.encoding)]
    assert read_back and all(i.operands[0] in copies for i in read_back)


def test_register_b_ptx(monkeypatch):
    """Two wgmma dots, each B stored and fenced for the async proxy; ptxas assembles it
    for sm_90a. With the knob off the dots stay on mma.sync."""
    src = ASTSource(state_recurrence, SIG, {"K": 64, "V": 64, "BT": 64}, attrs=ALIGNED)
    monkeypatch.setenv("TEGULA_ALWAYS_COMPILE", "1")
    ck = tegula.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 2})
    ptx = ck.asm["ptx"]
    assert ptx.count("wgmma.mma_async") > 0 and "mma.sync" not in ptx
    assert ptx.count("fence.proxy.async.shared::cta") >= 2
    # h's B, cast where its accumulator left it, written by stmatrix (four 16-byte rows
    # of 8 lanes an instruction, where a thread has two elements of a row); v's, scaled
    # in the layout its copies wrote, by 16-byte stores
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    if find_ptxas() is not None:
        assert ck.asm.get("cubin")
    monkeypatch.setattr(knobs, "wgmma_register_b", False)
    ck = tegula.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 2})
    assert "wgmma.mma_async" not in ck.asm["ptx"] and "mma.sync" in ck.asm["ptx"]


@pytest.mark.skipif(not has_torch_gpu(), reason="no CUDA GPU")
@pytest.mark.parametrize("num_warps", [4, 8])
def test_register_b_on_the_gpu(num_warps):
    import torch
    T, K, V, BT = 300, 64, 128, 64
    q, k, v, g = inputs(T, K, V, np.random.default_rng(num_warps))
    dev = [torch.from_numpy(a).cuda() for a in (q, k, v, g)]
    o = torch.full((T, V), float("nan"), device="cuda")
    h = torch.full((K, V), float("nan"), device="cuda")
    state_recurrence[(1,)](*dev, o, h, T, K=K, V=V, BT=BT, num_warps=num_warps, num_stages=2)
    want_o, want_h = reference(q, k, v, g, BT)
    np.testing.assert_allclose(o.cpu().numpy(), want_o, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(h.cpu().numpy(), want_h, rtol=2e-3, atol=2e-3)


@tegula.jit
def gated_state(k_ptr, v_ptr, gk_ptr, h_ptr, T, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
    """fla's gla state update (chunk_fwd_kernel_h with per-key gates): k and its gates
    are [K, T] tiles contiguous along K, the gate tile read back into registers to scale
    k, the scaled k the dot's A."""
    o_k, o_v = tl.arange(0, K), tl.arange(0, V)
    h = tl.zeros([K, V], dtype=tl.float32)
    for t0 in range(0, T, BT):
        o_t = t0 + tl.arange(0, BT)
        m_t = o_t < T
        b_k = tl.load(k_ptr + o_k[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)
        b_gk = tl.load(gk_ptr + o_k[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)
        b_v = tl.load(v_ptr + o_t[:, None] * V + o_v[None, :], mask=m_t[:, None], other=0.0)
        h += tl.dot((b_k * tl.exp(b_gk)).to(b_k.dtype), b_v)
    tl.store(h_ptr + o_k[:, None] * V + o_v[None, :], h)


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("capability", [80, 90])
def test_tiles_contiguous_along_their_rows_are_prefetched_in_vectors(num_warps, capability):
    """The gate tile's ring is stored contiguous along K, the way its copies run: 16-byte
    cp.async copies (stored row-major, each was 4 bytes), read back right."""
    K, V, BT, T = 32, 64, 32, 75
    sig = {"k_ptr": "*fp16", "v_ptr": "*fp16", "gk_ptr": "*fp32", "h_ptr": "*fp32", "T": "i32",
           "K": "constexpr", "V": "constexpr", "BT": "constexpr"}
    kernel = tir_opt(gated_state, sig, {"K": K, "V": V, "BT": BT},
                     attrs={"k_ptr": 16, "v_ptr": 16, "gk_ptr": 16, "h_ptr": 16})
    ptx = compile_kernel(kernel, {"num_warps": num_warps, "num_stages": 3}, capability)[0]["ptx"]
    assert "cp.async.cg.shared.global" in ptx and "cp.async.ca.shared.global" not in ptx
    rng = np.random.default_rng(num_warps + capability)
    k = rng.uniform(-1, 1, (T, K)).astype(np.float16)
    gk = rng.uniform(-0.5, 0, (T, K)).astype(np.float32)
    v = rng.uniform(-1, 1, (T, V)).astype(np.float16)
    h = np.full((K, V), np.nan, np.float32)
    EmulatedKernel(kernel, num_warps, capability=capability, num_stages=3).run((1, 1, 1), [k, v, gk, h, T])
    scaled = (k.astype(np.float32) * np.exp(gk)).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(h, scaled.T @ v.astype(np.float64), rtol=2e-3, atol=2e-3)
