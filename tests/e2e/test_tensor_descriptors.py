"""Device-side tensor descriptors (`tl.make_tensor_descriptor`, `desc.load/store`,
descriptor atomics) end to end on every backend (the `on` fixture): a tiled copy with
an in-place update over a matrix whose sizes are not multiples of the block (loads pad,
stores clip), NaN padding, a descriptor reduction, and Triton's checks."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import CompilationError


@tegula.jit
def scale_kernel(x_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [M, N], [stride, 1], [BM, BN])
    dst = tl.make_tensor_descriptor(out_ptr, [M, N], [stride, 1], [BM, BN])
    off_m, off_n = tl.program_id(0) * BM, tl.program_id(1) * BN
    block = src.load([off_m, off_n])
    dst.store([off_m, off_n], block * 2 + 1)


def test_tiled_update_pads_loads_and_clips_stores(on):
    # rows padded to 48 elements: a descriptor's outer strides are multiples of 16 bytes
    m, n, stride = 37, 45, 48
    x = np.random.default_rng(13).standard_normal((m, stride)).astype(np.float32)
    out = on(np.full((m + 1, stride), -7.0, np.float32))  # one extra row must stay untouched
    scale_kernel[(3, 3)](on(x), out, m, n, stride, BM=16, BN=16)
    got = on.back(out)
    np.testing.assert_array_equal(got[:m, :n], x[:, :n] * 2 + 1)
    assert (got[m] == -7.0).all() and (got[:, n:] == -7.0).all()


@tegula.jit
def pad_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, [N], [1], [BLOCK], padding_option="nan")
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load_tensor_descriptor(desc, [N - BLOCK // 2]))


def test_nan_padding(on):
    x = np.arange(20, dtype=np.float32)
    out = on(np.zeros(16, np.float32))
    pad_kernel[(1,)](on(x), out, 20, BLOCK=16)
    got = on.back(out)
    np.testing.assert_array_equal(got[:8], x[12:])
    assert np.isnan(got[8:]).all()


@tegula.jit
def reduce_kernel(acc_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(acc_ptr, [M, N], [stride, 1], [BM, BN])
    desc.atomic_add([0, 0], tl.full([BM, BN], 1, tl.int32) + tl.program_id(0))


def test_descriptor_atomic_add_from_several_programs(on):
    acc = on(np.zeros((5, 8), np.int32))  # rows of 32 bytes, 6 elements of them used
    reduce_kernel[(4,)](acc, 5, 6, 8, BM=8, BN=8)
    want = np.zeros((5, 8), np.int32)
    want[:, :6] = 1 + 2 + 3 + 4
    np.testing.assert_array_equal(on.back(acc), want)


@tegula.jit
def bad_desc_kernel(x_ptr, n, WHAT: tl.constexpr):
    if WHAT == 0:
        tl.make_tensor_descriptor(x_ptr, [n], [1], [2])
    elif WHAT == 1:
        tl.make_tensor_descriptor(x_ptr, [n, n], [n, n], [16, 16])
    else:
        d = tl.make_tensor_descriptor(x_ptr, [n], [1], [16])
        d.load([0, 0])


@pytest.mark.parametrize("what, message", [(0, "at least 16 bytes"), (1, "last dim must be 1"),
                                           (2, "expected 1 offsets")])
def test_checks(what, message):
    with pytest.raises(CompilationError, match=message):
        bad_desc_kernel[(1,)](np.zeros(64, np.float32), 64, WHAT=what)
