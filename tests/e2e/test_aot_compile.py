"""Ahead-of-time compile with Triton's names and paths, on a machine with or without a
GPU: `compile(ASTSource(...), target=GPUTarget("cuda", arch, 32))` gives PTX for that
architecture (and a cubin when ptxas is available)."""
from __future__ import annotations

import shutil

import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.compiler import ASTSource


@tegula.jit
def exp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.exp(tl.load(x_ptr + offs, mask=m)), mask=m)


@pytest.mark.parametrize("arch, ptx_target", [(80, "sm_80"), (90, "sm_90a")])
def test_compile_for_a_gpu_target_without_launching(arch, ptx_target):
    src = ASTSource(exp_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                    {"BLOCK": 256})
    compiled = tegula.compile(src, target=GPUTarget("cuda", arch, 32))
    assert f".target {ptx_target}" in compiled.asm["ptx"]
    assert "exp_kernel" in compiled.asm["tir"]
    if shutil.which("ptxas"):  # ptxas may also come from CUDA_HOME or a wheel; PATH is enough here
        assert "cubin" in compiled.asm
