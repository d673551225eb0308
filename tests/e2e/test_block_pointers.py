"""tl.make_block_ptr / tl.advance and loads and stores through block pointers, end to
end on every backend (the `on` fixture): a matmul whose block pointers are loop-carried
and advanced, boundary checks on sizes that are not multiples of the block, padding
with zero and NaN, strided (transposed) views, a block pointer merged by an `if`, the
`.advance` / `.store` methods, and Triton's errors."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import CompilationError


@tegula.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    a = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pm * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pn * BN), (BK, BN), (0, 1))
    acc = tl.zeros((BM, BN), tl.float32)
    for _k in range(0, K, BK):
        x = tl.load(a, boundary_check=(0, 1), padding_option="zero")
        y = tl.load(b, boundary_check=(0, 1))
        acc += tl.dot(x, y, input_precision="ieee")
        a = tl.advance(a, (0, BK))
        b = tl.advance(b, (BK, 0))
    c = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(c, acc, boundary_check=(0, 1))


@pytest.mark.parametrize("transposed_b", [False, True])
def test_matmul_with_advanced_block_pointers(on, transposed_b):
    rng = np.random.default_rng(5)
    m, n, k = 50, 37, 45  # none a multiple of the 16-wide blocks
    a = rng.standard_normal((m, k)).astype(np.float32)
    b_storage = rng.standard_normal((n, k) if transposed_b else (k, n)).astype(np.float32)
    b = b_storage.T if transposed_b else b_storage
    sbk, sbn = (1, k) if transposed_b else (n, 1)  # element strides of b (k x n)
    c = on(np.full((m, n), np.nan, np.float32))
    matmul_kernel[(4, 3)](on(a), on(b_storage), c, m, n, k, k, 1, sbk, sbn, n, 1, BM=16, BN=16, BK=16)
    np.testing.assert_allclose(on.back(c), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@tegula.jit
def pad_kernel(x_ptr, out_ptr, n, stride, NAN: tl.constexpr, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (n,), (stride,), (tl.program_id(0) * BLOCK - 4,), (BLOCK,), (0,))
    if NAN:
        v = tl.load(p, boundary_check=(0,), padding_option="nan")
    else:
        v = tl.load(p, boundary_check=0)
    q = tl.make_block_ptr(out_ptr, (2 * BLOCK,), (1,), (tl.program_id(0) * BLOCK,), (BLOCK,), (0,))
    tl.store(q, v)


@pytest.mark.parametrize("nan", [False, True])
def test_boundary_check_pads_below_and_above(on, nan):
    x = np.random.default_rng(6).standard_normal(20).astype(np.float32)
    out = on(np.zeros(32, np.float32))
    pad_kernel[(2,)](on(x[::1]), out, 10, 2, NAN=nan, BLOCK=16)  # every other element of x: 10 of them
    got = on.back(out)
    idx = np.arange(32) - 4  # element index each output reads
    inside = (idx >= 0) & (idx < 10)
    np.testing.assert_array_equal(got[inside], x[::2][idx[inside]])
    assert (np.isnan(got[~inside]) if nan else got[~inside] == 0).all()


@tegula.jit
def branch_kernel(x_ptr, out_ptr, SWAP: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (4, 8), (8, 1), (0, 0), (4, 8), (1, 0))
    if tl.program_id(0) == 1:  # a block pointer merged from two branches (runtime condition)
        p = tl.advance(p, (0, 0))
        q = tl.make_block_ptr(out_ptr, (8, 8), (8, 1), (4, 0), (4, 8), (1, 0))
    else:
        q = tl.make_block_ptr(out_ptr, (8, 8), (8, 1), (0, 0), (4, 8), (1, 0))
    v = tl.load(p)
    tl.store(q, v * 2 + tl.program_id(0))


def test_block_pointers_merge_through_branches(on):
    x = np.arange(32, dtype=np.int32)
    out = on(np.zeros(64, np.int32))
    branch_kernel[(2,)](on(x), out, SWAP=False)
    np.testing.assert_array_equal(on.back(out), np.concatenate([x * 2, x * 2 + 1]))


@tegula.jit
def member_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Triton's block pointer is a tensor: `.advance` and `.store` are its methods
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    q = tl.make_block_ptr(out_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    v = tl.load(p.advance([tl.program_id(0) * BLOCK]), boundary_check=(0,))
    q.advance((tl.program_id(0) * BLOCK,)).store(v + 1, boundary_check=(0,))


def test_advance_and_store_are_block_pointer_methods(on):
    x = np.arange(40, dtype=np.float32)
    out = on(np.zeros(40, np.float32))
    member_kernel[(3,)](on(x), out, 40, BLOCK=16)
    np.testing.assert_array_equal(on.back(out), x + 1)


@tegula.jit
def misuse_kernel(x_ptr, WHAT: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (16,), (0,))
    if WHAT == 0:
        tl.load(p, mask=tl.arange(0, 16) < 4)
    elif WHAT == 1:
        tl.load(p, boundary_check=(1,))
    elif WHAT == 2:
        tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (12,), (0,))
    else:
        tl.load(x_ptr + tl.arange(0, 16), boundary_check=(0,))


@pytest.mark.parametrize("what, message", [
    (0, "`mask` and `other` arguments cannot be specified for loading block pointers"),
    (1, "boundary_check dimension 1 is out of range"),
    (2, "block_shape to be powers of two"),
    (3, "please use block pointers"),
])
def test_misuse_is_reported_at_the_kernel_line(what, message):
    with pytest.raises(CompilationError, match=message) as info:
        misuse_kernel[(1,)](np.zeros(16, np.float32), WHAT=what)
    assert info.value.loc.line > misuse_kernel.starting_line_number
