"""Where a pipelined loop waits for its wgmma dots (sm_90a): each dot that is not
carried into the next iteration is waited for right before the first op that reads
it, with the dots issued since still in flight (`async_dots.LateWait`), so a body
rotated as FlashAttention-3 runs it — S = Q·K_j, then O += P·V_prev, then the
softmax of S — runs the softmax while the second dot does. The A operand of a dot
left in flight is read by its wait (its registers stay live); a dot outside any loop
gets its B staged in shared memory and runs on wgmma too. Checked on the tgir, the
LLVM IR and ptxas, and for values on the host emulator (exact small-integer inputs)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas


@tegula.jit
def rotated(q_ptr, k_ptr, v_ptr, o_ptr, N, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """o = sum over KV blocks j of fp16(q @ k_j^T / 64) @ v_j, each step halving what came
    before; the P·V product of a block is added in the next step (p, prev carried), the
    last one after the loop."""
    rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    p = tl.zeros((BM, BN), dtype=tl.float16)
    prev = 0
    for n in range(0, N, BN):
        k = tl.load(k_ptr + (n + rn)[:, None] * D + rd[None, :])
        s = tl.dot(q, tl.trans(k))
        v = tl.load(v_ptr + (prev + rn)[:, None] * D + rd[None, :])
        acc = tl.dot(p, v, acc)
        p = (s * (1.0 / 64)).to(tl.float16)
        acc = acc * 0.5
        prev = n
    v = tl.load(v_ptr + (N - BN + rn)[:, None] * D + rd[None, :])
    acc = tl.dot(p, v, acc)
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc)


def _kernel(bm: int, bn: int, d: int):
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32",
           "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
    attrs = {n: 16 for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "N")}
    return tir_opt(rotated, sig, {"BM": bm, "BN": bn, "D": d}, attrs=attrs)


def _loop_body(tgir: str) -> list[str]:
    """The pipelined loop's lines that issue or wait for dots, in order."""
    body = tgir[tgir.index(" = for "):]
    body = body[:body.index("\n  }")]
    return [ln.strip() for ln in body.splitlines() if re.search(r"= dot(_wait)? |= mul ", ln)]


def _order(lines: list[str]) -> list[str]:
    """Each line as `dot`, `wait N` or `mul` (the rescale of the accumulator)."""
    out = []
    for ln in lines:
        if "= dot_wait " in ln:
            m = re.search(r"pending = (\d+)", ln)
            out.append(f"wait {m.group(1) if m else 0}")
        elif "= dot " in ln:
            out.append("dot")
        elif "tile<64x128xf32" in ln:  # the accumulator's (BM x D) rescale, not the scores' scaling
            out.append("mul")
    return out


def test_each_dot_is_waited_for_where_it_is_first_read(monkeypatch):
    asm, _md = compile_kernel(_kernel(64, 64, 128), {"num_warps": 4, "num_stages": 3}, 90)
    # S = Q·K issued, O += P·V issued, S waited for with P·V still in flight (the
    # scores' scaling reads it), then P·V waited for before the rescale reads it
    assert _order(_loop_body(asm["tgir"])) == ["dot", "dot", "wait 1", "wait 0", "mul"]
    monkeypatch.setenv("TEGULA_WGMMA_WAIT_AT_USE", "0")
    asm, _md = compile_kernel(_kernel(64, 64, 128), {"num_warps": 4, "num_stages": 3}, 90)
    assert _order(_loop_body(asm["tgir"])) == ["dot", "wait 0", "dot", "wait 0", "mul"]


def test_register_a_stays_live_up_to_its_wait():
    """An A operand in registers is read by the wait of its dot: P (64 x 64 fp16: 16
    registers a thread) by P·V's, so the next P, computed while that dot runs, cannot be
    given its registers; Q (64 x 128: 32) by S's. The dot after the loop waits at once."""
    asm, _md = compile_kernel(_kernel(64, 64, 128), {"num_warps": 4, "num_stages": 3}, 90)
    waits = re.findall(r'asm sideeffect "wgmma\.wait_group\.sync\.aligned (\d);", "([^"]*)"', asm["llir"])
    # (pending, accumulator registers, registers kept live)
    assert sorted((int(n), c.count("=f"), c.count(",r")) for n, c in waits) == [(0, 64, 0), (0, 64, 16), (1, 32, 32)]


@pytest.mark.parametrize("num_warps", [4, 8])
def test_rotated_loop_on_the_emulator(num_warps):
    BM, BN, D, N = 64 * (num_warps // 4), 64, 64, 256
    kernel = _kernel(BM, BN, D)
    ek = EmulatedKernel(kernel, num_warps, capability=90, num_stages=3)
    # both loop dots and the one after the loop (its B staged in shared memory)
    assert sorted(c.version for c in ek.plan.mma.values()) == [3, 3, 3]
    rng = np.random.default_rng(3 + num_warps)
    # small integers: every product and sum is exact, and so is P in fp16 (multiples of
    # 1/64 below 2**11 / 64)
    q, k, v = (rng.integers(-3, 4, shape).astype(np.float16) for shape in ((BM, D), (N, D), (N, D)))
    o = np.full((BM, D), np.nan, np.float32)
    values = {"q_ptr": q, "k_ptr": k, "v_ptr": v, "o_ptr": o, "N": N}
    ek.run((1, 1, 1), [values[n] for n in kernel.arg_names])
    # the kernel's recurrence in float64 (exact here, as in f32)
    want, p, prev = np.zeros((BM, D)), np.zeros((BM, BN)), 0
    for n in range(0, N, BN):
        want = (want + p @ v[prev:prev + BN].astype(np.float64)) * 0.5
        p, prev = (q.astype(np.float64) @ k[n:n + BN].astype(np.float64).T) / 64, n
    want += p @ v[N - BN:].astype(np.float64)
    np.testing.assert_allclose(o, want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_rotated_loop_assembles():
    asm, _md = compile_kernel(_kernel(128, 64, 128), {"num_warps": 8, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    assert ptx.count("wgmma.wait_group.sync.aligned 1;") == 1
    assert "cubin" in asm
