"""Triton's tutorial 09 (persistent matmul), unmodified, imported through `tegula.compat`
(`import triton` is tegula) and its tensor-descriptor kernels compiled ahead of time for
sm_90a: host `TensorDescriptor` arguments (`matmul_kernel_tma`,
`matmul_kernel_tma_persistent`) and device-side `tl.make_tensor_descriptor` of
arguments (`matmul_kernel_descriptor_persistent`) all load A and B with TMA into the
rings wgmma reads, write C with TMA stores, and ptxas assembles them. The tutorial file is Triton's
(release/3.6.x); the test skips where it is not at hand (`TEGULA_TUTORIALS_DIR`)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.ptxas import find_ptxas

TUTORIAL = Path(os.environ.get("TEGULA_TUTORIALS_DIR", "/work/shared/upstream/tutorials")) / "09-persistent-matmul.py"

pytestmark = [pytest.mark.skipif(not TUTORIAL.exists(), reason=f"{TUTORIAL} is not here"),
              pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")]

TMA = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


@pytest.fixture(scope="module")
def tutorial():
    from tegula import compat

    compat.install()
    try:
        spec = importlib.util.spec_from_file_location("tutorial09", TUTORIAL)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        compat.uninstall()


def _compile(kernel, signature, constexprs, attrs, num_warps=8, num_stages=3):
    import tegula
    from tegula.compiler import ASTSource

    fn = getattr(kernel, "fn", kernel)  # the autotuner's JIT function
    src = ASTSource(fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return tegula.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


BLOCKS = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
SIZES = {"M": "i32", "N": "i32", "K": "i32"}
# what the runtime specializes host descriptors of 16-aligned tensors with shapes that are
# multiples of 16 to: aligned bases, strides and shape leaves (a TMA store needs its
# rows known to end on 16 bytes)
HOST_ATTRS = {**{f"{d}.{i}": 16 for d in ("a_desc", "b_desc", "c_desc") for i in range(4)}, "M": 16, "N": 16, "K": 16}


def _host_signature():
    desc = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[128, 64]>",
            "c_desc": "tensordesc<fp16[128, 128]>"}
    return {**desc, **SIZES}


def test_host_descriptor_kernel(tutorial):
    sig = {**_host_signature(), **{k: "constexpr" for k in (*BLOCKS, "FP8_OUTPUT", "WARP_SPECIALIZE")}}
    ck = _compile(tutorial.matmul_kernel_tma, sig, {**BLOCKS, "FP8_OUTPUT": False, "WARP_SPECIALIZE": False},
                  HOST_ATTRS)
    assert ck.asm["ptx"].count(TMA) >= 2 and "cubin" in ck.asm
    assert len(ck.metadata.tensormaps) == 3  # A and B read, C written by TMA
    assert TMA_STORE in ck.asm["ptx"]


def test_persistent_host_descriptor_kernel(tutorial):
    consts = {**BLOCKS, "FP8_OUTPUT": False, "EPILOGUE_SUBTILE": False, "NUM_SMS": 132, "WARP_SPECIALIZE": False}
    sig = {**_host_signature(), **{k: "constexpr" for k in consts}}
    ck = _compile(tutorial.matmul_kernel_tma_persistent, sig, consts, HOST_ATTRS)
    assert TMA in ck.asm["ptx"] and "cubin" in ck.asm


def test_device_descriptor_kernel(tutorial):
    consts = {**BLOCKS, "EPILOGUE_SUBTILE": True, "NUM_SMS": 132, "WARP_SPECIALIZE": False, "FLATTEN": True}
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **SIZES, **{k: "constexpr" for k in consts}}
    attrs = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": 16, "N": 16, "K": 16}
    ck = _compile(tutorial.matmul_kernel_descriptor_persistent, sig, consts, attrs)
    assert TMA in ck.asm["ptx"] and TMA_STORE in ck.asm["ptx"] and "cubin" in ck.asm
    assert len(ck.metadata.tensormaps) == 3
