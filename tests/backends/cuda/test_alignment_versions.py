"""`alignment_versions`: which kernels get a second version for aligned sizes, on which
divisors, and what each version compiles to. The versions' results on every backend:
tests/e2e/test_alignment_versioned_kernels.py."""
from __future__ import annotations

import re

import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.alignment_versions import version_divisors
from tegula.ir.core import ArgAttrs
from tegula.runtime.compiler import optimized_ir
from tegula.runtime.source import ASTSource


@tegula.jit
def inductor_mm(a_ptr, b_ptr, c_ptr, ks0, ks1, ks2, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Inductor's mm template under dynamic shapes, cut down: M, N, K are `ks0..ks2`, the
    operands' row strides K and N."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(ks2, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + (rm % ks0)[:, None] * ks2 + kk[None, :], mask=kk[None, :] < ks2, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * ks1 + (rn % ks1)[None, :], mask=kk[:, None] < ks2, other=0.0)
        acc += tl.dot(a, b)
    mask = (rm[:, None] < ks0) & (rn[None, :] < ks1)
    tl.store(c_ptr + rm[:, None] * ks1 + rn[None, :], acc.to(tl.float16), mask=mask)


@tegula.jit
def scale_rows(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    """No loop: a row's one load and store, whatever the alignment."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row * stride + cols, x * 2, mask=cols < n)


@tegula.jit
def looped_row_sums(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


MM_SIGNATURE = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "ks0": "i32", "ks1": "i32", "ks2": "i32",
                "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
MM_CONSTEXPRS = {"BM": 64, "BN": 64, "BK": 32}
POINTERS_ALIGNED = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16}


def _tgir_and_ptx(src, capability, num_stages=3):
    asm = compile_kernel(optimized_ir(src), {"num_warps": 4, "num_stages": num_stages}, capability)[0]
    return asm["tgir"], asm["ptx"]


def _branches(tgir):
    """The text of the versioned kernel's two branches (aligned first)."""
    start = tgir.index("  if ")
    mid = tgir.index("\n  } {\n", start)
    return tgir[start:mid], tgir[mid:]


def test_the_sizes_a_matmul_reads_rows_with_are_tested_on_their_16_byte_divisor():
    kernel = optimized_ir(ASTSource(inductor_mm, MM_SIGNATURE, MM_CONSTEXPRS, POINTERS_ALIGNED))
    names = kernel.arg_names
    # ks1 and ks2 are the row strides of halves: multiples of 8 make rows 16-byte aligned;
    # ks0 only wraps the rows (`rm % ks0`), no access gets wider for it
    assert {names[i]: d for i, d in version_divisors(kernel, 4).items()} == {"ks1": 8, "ks2": 8}


@pytest.mark.parametrize("capability", [80, 90])
def test_the_aligned_version_copies_16_bytes_and_the_other_keeps_the_narrow_copies(capability):
    tgir, ptx = _tgir_and_ptx(ASTSource(inductor_mm, MM_SIGNATURE, MM_CONSTEXPRS, POINTERS_ALIGNED), capability)
    head = tgir[:tgir.index("  if ")]
    assert re.search(r"and %ks1, %\d+ : i32", head) and re.search(r"and %ks2, %\d+ : i32", head)
    aligned, other = _branches(tgir)
    assert "known_multiple_of', values = (8,)" in aligned and "known_multiple_of" not in other
    # both versions pipelined: the aligned one's copies are 16-byte cp.async, the
    # other's rows (2-byte aligned) cannot be
    assert "async_copy" in aligned
    sizes = set(re.findall(r"cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)? \[[^]]*\], \[[^]]*\], (\d+)", ptx))
    assert "16" in sizes, sizes


def test_sizes_the_launch_measured_are_not_versioned():
    # the JIT's own specialization knows each int's divisor exactly: no other alignment
    # can reach this compiled kernel
    exact = ArgAttrs(divisibility=1, exact_divisibility=True)
    attrs = {**POINTERS_ALIGNED, **{k: exact for k in ("ks0", "ks1", "ks2")}}
    kernel = optimized_ir(ASTSource(inductor_mm, MM_SIGNATURE, MM_CONSTEXPRS, attrs))
    assert version_divisors(kernel, 4) == {}
    tgir, _ = _tgir_and_ptx(ASTSource(inductor_mm, MM_SIGNATURE, MM_CONSTEXPRS, attrs), 90)
    assert "known_multiple_of" not in tgir


def test_sizes_promised_divisible_by_16_need_no_version():
    attrs = {**POINTERS_ALIGNED, "ks1": 16, "ks2": 16}
    assert version_divisors(optimized_ir(ASTSource(inductor_mm, MM_SIGNATURE, MM_CONSTEXPRS, attrs)), 4) == {}


def test_accesses_outside_loops_alone_are_not_worth_a_version():
    src = ASTSource(scale_rows, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "stride": "i32",
                                 "BLOCK": "constexpr"}, {"BLOCK": 128}, {"x_ptr": 16, "y_ptr": 16})
    assert version_divisors(optimized_ir(src), 4) == {}


def test_the_knob_and_checked_mode_leave_one_version(monkeypatch):
    from tegula.config import knobs

    src = ASTSource(inductor_mm, MM_SIGNATURE, MM_CONSTEXPRS, POINTERS_ALIGNED)
    monkeypatch.setattr(knobs, "alignment_versions", False)
    assert "known_multiple_of" not in _tgir_and_ptx(src, 90)[0]
    monkeypatch.setattr(knobs, "alignment_versions", True)
    asm = compile_kernel(optimized_ir(src), {"num_warps": 4, "num_stages": 3, "checked": True}, 90)[0]
    assert "known_multiple_of" not in asm["tgir"]


def test_do_not_specialize_makes_a_jit_launch_versioned():
    from tegula.runtime.specialization import describe_specs, spec_value

    specs = [spec_value(48, specialize=False), spec_value(48)]
    described = describe_specs(["k", "n"], [False, False], specs, [48, 48], "kern", aligned=[False, True])
    assert described.attrs["k"] == ArgAttrs(divisibility=1, exact_divisibility=False)
    assert described.attrs["n"] == ArgAttrs(divisibility=16, exact_divisibility=True)


@pytest.mark.parametrize("capability", [80, 90])
def test_copies_too_narrow_for_cp_async_store_16_bytes_a_thread(capability, monkeypatch):
    # the unaligned version alone (the knob off): its rows are 2-byte aligned, so the
    # ring's copies go through registers; each thread holds 8 consecutive halves of a
    # row (`layout_anchors.staged_through_registers`) and stores them as one vector,
    # where Triton's default layout for a 1-wide access stored them one by one
    from tegula.config import knobs

    monkeypatch.setattr(knobs, "alignment_versions", False)
    _, ptx = _tgir_and_ptx(ASTSource(inductor_mm, MM_SIGNATURE, MM_CONSTEXPRS, POINTERS_ALIGNED), capability)
    assert not re.search(r"cp\.async\.c[ag]", ptx)
    stores = re.findall(r"st\.shared(\.v\d)?\.(?:b|u)(\d+)", ptx)
    assert (".v4", "32") in stores and not any(bits == "16" for _, bits in stores), sorted(set(stores))


def test_each_version_loads_in_its_own_layout():
    # grouped as one, the unaligned version's 2-byte loads took the aligned one's
    # 8-element layout: 8 loads a thread where one coalesced load served
    src = ASTSource(looped_row_sums, {"x_ptr": "*fp16", "out_ptr": "*fp32", "n": "i32", "stride": "i32",
                                      "BLOCK": "constexpr"}, {"BLOCK": 1024}, {"x_ptr": 16, "out_ptr": 16})
    tgir, _ = _tgir_and_ptx(src, 90)
    aligned, other = _branches(tgir)
    spt = re.compile(r"= load [^\n]*spt=\[(\d+)\]")
    assert spt.findall(aligned) == ["8"] and spt.findall(other) == ["1"], (spt.findall(aligned), spt.findall(other))
