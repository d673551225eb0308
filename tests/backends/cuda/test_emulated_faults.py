"""The emulator stops where the GPU would: a vector access to an address that is not a
multiple of its size ("misaligned address" on the GPU, which an x86 host performs
without complaint) raises `EmulatedFault` after the launch, naming the access
(`emulator/faults.py`)."""
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
