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
def scale_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    dst = tl.make_tensor_descriptor(out_ptr, [M, N], [N, 1], [BM, BN])
    off_m, off_n = tl.program_id(0) * BM, tl.program_id(1) * BN
    block = src.load([off_m, off_n])
    dst.store([off_m, off_n], block * 2 + 1)


def test_tiled_update_pads_loads_and_clips_stores(on):
    m, n = 37, 45
    x = np.random.default_rng(13).standard_normal((m, n)).astype(np.float32)
    out = on(np.full((m + 1, n), -7.0, np.float32))  # one extra row must stay untouched
    scale_kernel[(3, 3)](on(x), out, m, n, BM=16, BN=16)
    got = on.back(out)
    np.testing.assert_array_equal(got[:m], x * 2 + 1)
    assert (got[m] == -7.0).all()


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
def reduce_kernel(acc_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(acc_ptr, [M, N], [N, 1], [BM, BN])
    desc.atomic_add([0, 0], tl.full([BM, BN], 1, tl.int32) + tl.program_id(0))


def test_descriptor_atomic_add_from_several_programs(on):
    acc = on(np.zeros((5, 6), np.int32))
    reduce_kernel[(4,)](acc, 5, 6, BM=8, BN=8)
    np.testing.assert_array_equal(on.back(acc), np.full((5, 6), 1 + 2 + 3 + 4))


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
