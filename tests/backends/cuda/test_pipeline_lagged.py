"""Carried values the pipeliner runs ahead and the body also reads (`LoopPlan.lagged`):
FlexAttention's masked blocks jump through a table of block indices, and the offset
that addresses the next K/V block also positions its mask; the loop carries the offset
S-1 iterations ahead for the copies and, beside it, this iteration's and the ones in
between for the math (and for the code after the loop)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.runtime.compiler import optimized_ir
from tegula.runtime.source import ASTSource


@tegula.jit
def table_walk(x_ptr, w_ptr, idx_ptr, out_ptr, last_ptr, n_blocks, BM: tl.constexpr, BN: tl.constexpr,
               D: tl.constexpr):
    """out = sum over the table's blocks j of (x · w[rows of block j]ᵀ), masked where the
    key index (the offset's rows) is above the query's, as a causal block would be."""
    rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    x = tl.load(x_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    off = tl.load(idx_ptr) * BN
    for i in range(0, n_blocks):
        keys = off + rn
        w = tl.load(w_ptr + keys[:, None] * D + rd[None, :])
        s = tl.dot(x, tl.trans(w))
        acc += tl.where(keys[None, :] <= rm[:, None] * 4, s, 0.0)
        # the jump to the next listed block (after the last, to block -1)
        nxt = tl.load(idx_ptr + i + 1, mask=i + 1 < n_blocks, other=-1)
        off += (nxt - tl.load(idx_ptr + i)) * BN
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)
    tl.store(last_ptr, off)


SIG = {"x_ptr": "*fp16", "w_ptr": "*fp16", "idx_ptr": "*i32", "out_ptr": "*fp32", "last_ptr": "*i32",
       "n_blocks": "i32", "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
BM, BN, D = 64, 32, 32


def _kernel():
    src = ASTSource(table_walk, SIG, {"BM": BM, "BN": BN, "D": D},
                    {"x_ptr": 16, "w_ptr": 16, "idx_ptr": 16, "out_ptr": 16})
    return optimized_ir(src)


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_jumping_offset_is_prefetched_and_lagged(capability, stages):
    kernel = _kernel()
    tgir = compile_kernel(kernel, {"num_warps": 4, "num_stages": stages}, capability)[0]["tgir"]
    assert f"smem<{stages}x{BN}x{D}xf16>" in tgir  # w's ring: the loop is pipelined
    loop = re.search(r"= for ([^:]*) :", tgir).group(1).split(", ")
    # bounds, acc, the offset (run ahead), read and write slots, the offset's S-1 lagged values
    assert len(loop) >= 3 + 1 + 1 + 2 + (stages - 1), loop

    rng = np.random.default_rng(stages * 10 + capability)
    x = rng.integers(-2, 3, (BM, D)).astype(np.float16)
    w = rng.integers(-2, 3, (12 * BN, D)).astype(np.float16)
    table = np.array([0, 3, 4, 9, 11], np.int32)
    for n in (len(table), 2, 1):  # fewer blocks than stages too
        want = np.zeros((BM, BN))
        for blk in table[:n]:
            keys = blk * BN + np.arange(BN)
            s = x.astype(np.float64) @ w[keys].astype(np.float64).T
            want += np.where(keys[None, :] <= np.arange(BM)[:, None] * 4, s, 0.0)
        out = np.zeros((BM, BN), np.float32)
        last = np.zeros(1, np.int32)
        EmulatedKernel(kernel, 4, capability=capability, num_stages=stages).run(
            (1, 1, 1), [x, w, table, out, last, n])
        np.testing.assert_array_equal(out, want)
        assert last[0] == -BN  # the loop's offset after its last block: this iteration's, not one run ahead


def test_knob_off_leaves_such_loops_unpipelined(monkeypatch):
    monkeypatch.setenv("TEGULA_PIPELINE_LAGGED", "0")
    kernel = _kernel()
    tgir = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, 90)[0]["tgir"]
    assert f"smem<3x{BN}x{D}xf16>" not in tgir
    rng = np.random.default_rng(1)
    x = rng.integers(-2, 3, (BM, D)).astype(np.float16)
    w = rng.integers(-2, 3, (4 * BN, D)).astype(np.float16)
    table = np.array([1, 3], np.int32)
    out, last = np.zeros((BM, BN), np.float32), np.zeros(1, np.int32)
    EmulatedKernel(kernel, 4, capability=90, num_stages=3).run((1, 1, 1), [x, w, table, out, last, 2])
    want = sum(np.where((b * BN + np.arange(BN))[None, :] <= np.arange(BM)[:, None] * 4,
                        x.astype(np.float64) @ w[b * BN:(b + 1) * BN].astype(np.float64).T, 0.0) for b in table)
    np.testing.assert_array_equal(out, want)
    assert last[0] == -BN
