"""`tl.extra.cuda.smid()`, `globaltimer()`, `num_warps()` and `num_threads()` on every
backend: the constexprs follow the launch's num_warps, the timer advances across a
loop, smid is a valid id (0 on the host backends); on the GPU path they are `%smid` /
`%globaltimer` reads that ptxas assembles for sm_80 and sm_90a."""
from __future__ import annotations

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.runtime.source import ASTSource


@triton.jit
def _threads(out_ptr):
    n: tl.constexpr = tl.extra.cuda.num_threads()
    offs = tl.arange(0, n)
    tl.store(out_ptr + offs, tl.full([n], tl.extra.cuda.num_warps(), tl.int32))


@pytest.mark.parametrize("num_warps", [1, 8])
def test_num_threads_is_32_per_warp(on, num_warps):
    out = on(np.zeros(512, np.int32))
    _threads[(1,)](out, num_warps=num_warps)
    got = on.back(out)
    np.testing.assert_array_equal(got[:32 * num_warps], num_warps)
    assert not got[32 * num_warps:].any()


@triton.jit
def _timed(data_ptr, elapsed_ptr, sm_ptr, ITERS: tl.constexpr):
    offs = tl.arange(0, 128)
    start = tl.extra.cuda.globaltimer()
    for _ in range(ITERS):
        tl.store(data_ptr + offs, tl.load(data_ptr + offs) + 1)
    end = tl.extra.cuda.globaltimer()
    tl.store(elapsed_ptr + tl.program_id(0), end - start)
    tl.store(sm_ptr + tl.program_id(0), tl.extra.cuda.smid())


def test_globaltimer_advances_and_smid_is_an_id(on):
    data = on(np.zeros(128, np.int64))
    elapsed, sm = on(np.zeros(1, np.int64)), on(np.full(1, -1, np.int32))
    _timed[(1,)](data, elapsed, sm, ITERS=200)
    assert (on.back(data) == 200).all()
    assert on.back(elapsed)[0] > 0
    assert on.back(sm)[0] >= 0
    if on.backend != "cuda":
        assert on.back(sm)[0] == 0  # no multiprocessors on the host


@pytest.mark.parametrize("cap", [80, 90])
def test_special_registers_in_ptx(cap):
    sig = {"data_ptr": "*i64", "elapsed_ptr": "*i64", "sm_ptr": "*i32"}
    ck = triton.compile(ASTSource(_timed, sig, {"ITERS": 10}), target=GPUTarget("cuda", cap, 32))
    ptx = ck.asm["ptx"]
    # one read each side of the loop, in program order; smid once
    assert ptx.count("%globaltimer") == 2
    assert ptx.count("%smid") == 1
    if find_ptxas() is not None:
        assert ck.asm["cubin"][:4] == b"\x7fELF"
