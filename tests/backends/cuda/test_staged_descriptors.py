"""The wgmma descriptors of an operand staged once in shared memory (loaded before the
loop, read by every iteration's dot): built so that LLVM folds them into `or`s, which
ptxas keeps in registers, unless that kernel reloads spilled values more than it stores
them (invariants reloaded in loops); then the compiler lowers it again with the
descriptors rematerializable (`add.s64` from an opaque start, as Triton's PTX has them)
and keeps whichever spills fewer bytes (`lower_wgmma.base_descriptor`).
Tutorial 06's D128 backward: 13 spilled descriptors reloaded per iteration of each
main loop the first way, none the second."""
from __future__ import annotations

import re

import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda import ptxas as ptxas_module
from tegula.backends.cuda.ptxas import find_ptxas

# a descriptor's constant fields have the swizzle mode in bits 62-63
DESCRIPTOR_ADD = re.compile(r"add\.s64\s+%rd\d+, %rd\d+, 46116862\d+;")
OPAQUE_MOV = re.compile(r"mov\.b32 %r\d+, %r\d+;")


@tegula.jit
def staged_a(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = sum over k blocks of a @ b_k: `a` loaded once (staged), b through a ring."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def _kernel():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32", "BM": "constexpr", "BN": "constexpr",
           "BK": "constexpr"}
    return tir_opt(staged_a, sig, {"BM": 128, "BN": 128, "BK": 64},
                   attrs={n: 16 for n in ("a_ptr", "b_ptr", "c_ptr", "K")})


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_a_kernel_that_does_not_spill_keeps_the_folded_descriptors():
    asm, md = compile_kernel(_kernel(), {"num_warps": 4, "num_stages": 3}, 90)
    assert "wgmma.mma_async" in asm["ptx"] and md["n_spills"] == 0
    assert not OPAQUE_MOV.search(asm["ptx"]) and "rematerialized_descriptors" not in md


@pytest.mark.parametrize("second_spills, chosen", [(40, True), (400, False)], ids=["fewer", "more"])
def test_a_spilling_kernel_takes_the_rematerialized_descriptors_if_they_spill_less(monkeypatch, second_spills,
                                                                                   chosen):
    """ptxas stubbed: the first assembly reports 200 bytes of spill stores and 240 of
    loads (reloads of invariants), the second (the PTX with the opaque start)
    `second_spills` stores and 40 more loads."""
    kernel = _kernel()
    seen: list[str] = []

    def assemble(ptx, arch, ptxas=None):
        seen.append(ptx)
        stores = 200 if len(seen) == 1 else second_spills
        return b"cubin%d" % len(seen), {"n_regs": 255, "n_spills": stores, "spill_loads": stores + 40,
                                        "static_shared": 0, "stack": stores}, ""

    monkeypatch.setattr(ptxas_module, "find_ptxas", lambda: "/stub/ptxas")
    monkeypatch.setattr(ptxas_module, "ptxas_version", lambda path: "stub")
    monkeypatch.setattr(ptxas_module, "assemble", assemble)
    asm, md = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, 90)
    assert len(seen) == 2
    first, second = seen
    # the staged operand's descriptors: folded `or`s the first time, adds from an
    # opaque start the second (a ring slot's are the same both times)
    assert not OPAQUE_MOV.search(first) and OPAQUE_MOV.search(second)
    assert len(DESCRIPTOR_ADD.findall(second)) > len(DESCRIPTOR_ADD.findall(first))
    assert md.get("rematerialized_descriptors", False) is chosen
    assert asm["ptx"] == (second if chosen else first)
    assert asm["cubin"] == (b"cubin2" if chosen else b"cubin1")
    assert md["n_spills"] == (second_spills if chosen else 200)


def test_spills_stored_more_than_reloaded_are_not_retried(monkeypatch):
    """Spill stores exceeding loads (no invariant reloaded in a loop, as the spilling
    configs of tutorial 06's forward): one assembly, no retry."""
    kernel = _kernel()
    seen: list[str] = []

    def assemble(ptx, arch, ptxas=None):
        seen.append(ptx)
        return b"cubin", {"n_regs": 255, "n_spills": 1056, "spill_loads": 768, "static_shared": 0, "stack": 1056}, ""

    monkeypatch.setattr(ptxas_module, "find_ptxas", lambda: "/stub/ptxas")
    monkeypatch.setattr(ptxas_module, "ptxas_version", lambda path: "stub")
    monkeypatch.setattr(ptxas_module, "assemble", assemble)
    asm, md = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, 90)
    assert len(seen) == 1 and "rematerialized_descriptors" not in md
