"""The CUDA lowering of `gather` is a gather, not a search: for Triton's test_gather
shapes ([128, 64] source, [256, 64] index, axis 0; [128, 128] index along axis 1) the
PTX holds one shared-memory store per source element and one load per result element
a thread owns, and stays a few thousand instructions (the comparisons the language
used to build made megabytes of it, and ptxas ran for minutes). Counts, not timings;
assembled by ptxas when it is installed (for sm_80 and sm_90a)."""
from __future__ import annotations

import re

import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.ptxas import find_ptxas


@tegula.jit
def gather_2d(src_ptr, idx_ptr, out_ptr, AXIS: tl.constexpr, S0: tl.constexpr, S1: tl.constexpr,
              I0: tl.constexpr, I1: tl.constexpr):
    src = tl.load(src_ptr + tl.arange(0, S0)[:, None] * S1 + tl.arange(0, S1)[None, :])
    idx = tl.load(idx_ptr + tl.arange(0, I0)[:, None] * I1 + tl.arange(0, I1)[None, :])
    out = tl.gather(src, idx, AXIS)
    tl.store(out_ptr + tl.arange(0, I0)[:, None] * I1 + tl.arange(0, I1)[None, :], out)


SIG = {"src_ptr": "*fp32", "idx_ptr": "*i64", "out_ptr": "*fp32", "AXIS": "constexpr", "S0": "constexpr",
       "S1": "constexpr", "I0": "constexpr", "I1": "constexpr"}


def _instructions(ptx: str) -> list[str]:
    body = ptx[ptx.index(".entry"):]
    return [ln.split()[0] for ln in body.splitlines()
            if ln.startswith("\t") and ln.strip() and not ln.strip().startswith((".", "//", "$", "{", "}", ")"))]


@pytest.mark.parametrize("cap", [80, 90])
@pytest.mark.parametrize("num_warps", [4, 8])
@pytest.mark.parametrize("shapes", [((128, 64), (256, 64), 0), ((128, 64), (128, 128), 1)])
def test_gather_ptx_is_one_load_per_result_element(cap, num_warps, shapes):
    (s0, s1), (i0, i1), axis = shapes
    k = tir_opt(gather_2d, SIG, {"AXIS": axis, "S0": s0, "S1": s1, "I0": i0, "I1": i1})
    asm, md = compile_kernel(k, {"num_warps": num_warps}, cap)
    ops = _instructions(asm["ptx"])
    threads = 32 * num_warps
    per_thread_src, per_thread_out = s0 * s1 // threads, i0 * i1 // threads
    shared_loads = sum(1 for o in ops if re.match(r"ld\.shared", o))
    shared_stores = sum(1 for o in ops if re.match(r"st\.shared", o))
    assert shared_loads == per_thread_out
    assert shared_stores <= per_thread_src
    # about 10 instructions per result element (index check, address, load, select, store)
    assert len(ops) < 16 * per_thread_out + 200, len(ops)
    assert "gather" in asm["tgir"] and "smem(" in asm["tgir"]
    if find_ptxas() is not None:
        assert asm.get("cubin"), "ptxas assembled the gather"
