"""The emulator stops where the GPU would: a vector access to an address that is not a
multiple of its size ("misaligned address" on the GPU, which an x86 host performs
without complaint), or a shared-memory access past the CTA's shared memory (an illegal
address on the GPU; the host reads or writes the buffer's neighbours), raises
`EmulatedFault` after the launch, naming the access (`emulator/faults.py`)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.emulator.faults import EmulatedFault
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def copy_rows(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs) * 2)


def _kernel():
    # the specialization says both pointers are 16-byte aligned: 16-byte vectors (4 a thread)
    return optimized_ir(ASTSource(copy_rows, signature={"src": "*fp32", "dst": "*fp32", "BLOCK": "constexpr"},
                                  constexprs={"BLOCK": 512}, attrs={"src": 16, "dst": 16}))


@pytest.mark.parametrize("capability", [80, 90])
def test_aligned_vectors_run(capability):
    ek = EmulatedKernel(_kernel(), 4, capability=capability)
    src = np.arange(512, dtype=np.float32)
    dst = np.zeros(512, np.float32)
    ek.run((1, 1, 1), [src, dst])
    np.testing.assert_array_equal(dst, src * 2)


def test_a_misaligned_vector_store_faults_as_on_the_gpu():
    """An argument that breaks the alignment its specialization promised (4 bytes past
    a 16-byte boundary): the GPU stops with "misaligned address"; so does the emulator."""
    ek = EmulatedKernel(_kernel(), 4, capability=80)
    src = np.arange(512, dtype=np.float32)
    buf = np.zeros(520, np.float32)
    base = (-(buf.ctypes.data // 4)) % 4  # the first 16-byte aligned element
    dst = buf[base + 1:base + 513]
    with pytest.raises(EmulatedFault, match="misaligned address.*16-byte global"):
        ek.run((1, 1, 1), [src, dst])


@tegula.jit
def small_matmul(a_ptr, b_ptr, c_ptr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        acc += tl.dot(tl.load(a_ptr + rm[:, None] * K + rk[None, :]), tl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def _matmul_kernel():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "constexpr", "BM": "constexpr",
           "BN": "constexpr", "BK": "constexpr"}
    return optimized_ir(ASTSource(small_matmul, sig, {"K": 128, "BM": 64, "BN": 64, "BK": 32},
                                  attrs={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16}))


@pytest.mark.parametrize("capability", [80, 90])  # cp.async + ldmatrix + mma.sync; wgmma
def test_shared_accesses_past_the_allocation_fault(capability):
    """The same pipelined matmul, given 1 KB less shared memory than it allocated (as a
    launch with a too small dynamic size, or an allocator that undercounts, would):
    its copies into the last slots and the dots reading them fault."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 128)).astype(np.float16)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    ek = EmulatedKernel(_matmul_kernel(), 4, capability=capability, num_stages=3)
    c = np.zeros((64, 64), np.float32)
    ek.run((1, 1, 1), [a, b, c])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)
    ek.runner.smem_bytes -= 1024
    with pytest.raises(EmulatedFault, match="out-of-range address.*shared access"):
        ek.run((1, 1, 1), [a, b, c])
