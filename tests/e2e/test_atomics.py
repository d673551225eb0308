"""tl.atomic_* end to end, through the frontend, on every backend: the numpy interpreter,
the CUDA lowering on the host emulator, and a real GPU when there is one. Kernels use
duplicate addresses inside a tile, tiles smaller than the CTA (so several threads hold
one element and only one may act), masks, scalar atomics whose old values are used,
and checked mode. The `on` fixture (every backend) is in conftest.py."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import OutOfBoundsError


@tegula.jit
def histogram_kernel(x_ptr, bins_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    tl.atomic_add(bins_ptr + x, 1, mask=m)


def test_histogram_with_duplicate_addresses(on):
    x = np.random.default_rng(1).integers(0, 13, 1000).astype(np.int32)
    bins = on(np.zeros(13, np.int32))
    histogram_kernel[(8,)](on(x), bins, 1000, BLOCK=128)
    np.testing.assert_array_equal(on.back(bins), np.bincount(x, minlength=13))


@tegula.jit
def reduce_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))
    tl.atomic_max(out_ptr + 1, tl.max(tl.where(m, x, -float("inf")), axis=0))
    tl.atomic_min(out_ptr + 2, tl.min(tl.where(m, x, float("inf")), axis=0), sem="relaxed")


def test_scalar_float_add_max_min(on):
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    out = on(np.array([0.0, -np.inf, np.inf], np.float32))
    reduce_kernel[(8,)](on(x), out, 1000, BLOCK=128)
    got = on.back(out)
    assert got[1] == x.max() and got[2] == x.min()
    assert abs(got[0] - x.astype(np.float64).sum()) < 1e-3


@tegula.jit
def ticket_kernel(counter_ptr, tickets_ptr, lane_tickets_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    mine = tl.atomic_add(counter_ptr, 1)                 # scalar, old value used
    tl.store(tickets_ptr + pid, mine)
    offs = tl.arange(0, BLOCK)
    lanes = tl.atomic_add(counter_ptr + 1 + offs * 0, tl.full([BLOCK], 1, tl.int32))  # one address, every lane
    tl.store(lane_tickets_ptr + pid * BLOCK + offs, lanes)


def test_old_values_are_distinct_tickets(on):
    programs, block = 6, 16  # 16 lanes in a 128-thread CTA: every element has copies
    counter = on(np.zeros(2, np.int32))
    tickets, lanes = on(np.full(programs, -1, np.int32)), on(np.full(programs * block, -1, np.int32))
    ticket_kernel[(programs,)](counter, tickets, lanes, BLOCK=block)
    assert sorted(on.back(tickets)) == list(range(programs))
    assert sorted(on.back(lanes)) == list(range(programs * block))
    np.testing.assert_array_equal(on.back(counter), [programs, programs * block])


@tegula.jit
def bits_kernel(a_ptr, o_ptr, x_ptr, s_ptr, val_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(val_ptr + offs, mask=m, other=0)
    tl.atomic_and(a_ptr + offs, v, mask=m)
    tl.atomic_or(o_ptr + offs, v, mask=m)
    tl.atomic_xor(x_ptr + offs, v, mask=m)
    old = tl.atomic_xchg(s_ptr + offs, v, mask=m)
    tl.store(val_ptr + offs, old, mask=m)


def test_bitwise_and_exchange_with_mask(on):
    rng = np.random.default_rng(3)
    base = [rng.integers(0, 2**62, 40).astype(np.uint64) for _ in range(4)]
    v = rng.integers(0, 2**62, 40).astype(np.uint64)
    args = [on(b.copy()) for b in base] + [on(v.copy())]
    bits_kernel[(1,)](*args, 37, BLOCK=64)
    a, o, x, s, old = (on.back(t) for t in args)
    m = np.arange(40) < 37
    np.testing.assert_array_equal(a, np.where(m, base[0] & v, base[0]))
    np.testing.assert_array_equal(o, np.where(m, base[1] | v, base[1]))
    np.testing.assert_array_equal(x, np.where(m, base[2] ^ v, base[2]))
    np.testing.assert_array_equal(s, np.where(m, v, base[3]))
    np.testing.assert_array_equal(old, np.where(m, base[3], v))


@tegula.jit
def claim_kernel(flags_ptr, won_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, N)
    old = tl.atomic_cas(flags_ptr + offs, tl.zeros([N], tl.int32), tl.full([N], 1, tl.int32) + pid)
    tl.store(won_ptr + pid * N + offs, (old == 0).to(tl.int32))


def test_cas_lets_exactly_one_program_claim_each_slot(on):
    programs, n = 5, 32
    flags, won = on(np.zeros(n, np.int32)), on(np.zeros(programs * n, np.int32))
    claim_kernel[(programs,)](flags, won, N=n)
    w = on.back(won).reshape(programs, n)
    f = on.back(flags)
    np.testing.assert_array_equal(w.sum(axis=0), np.ones(n))
    np.testing.assert_array_equal(f, np.argmax(w, axis=0) + 1)


@tegula.jit
def half_add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(out_ptr + offs % 8, tl.load(x_ptr + offs, mask=m, other=0.0), mask=m)


def test_fp16_add(on):
    x = (np.random.default_rng(4).integers(-8, 8, 200) / 4).astype(np.float16)  # exact sums in fp16
    out = on(np.zeros(8, np.float16))
    half_add_kernel[(4,)](on(x), out, 200, BLOCK=64)
    want = np.array([x[i::8].astype(np.float64).sum() for i in range(8)])
    np.testing.assert_array_equal(on.back(out).astype(np.float64), want)


@tegula.jit
def oob_atomic_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(x_ptr + offs, 1.0, mask=offs < n)


def test_out_of_bounds_atomic_is_reported(on):
    x = on(np.zeros(8, np.float32))
    oob_atomic_kernel[(1,)](x, 8, BLOCK=16, checked=True)  # in bounds: no report
    np.testing.assert_array_equal(on.back(x), np.ones(8))
    with pytest.raises(OutOfBoundsError) as info:
        oob_atomic_kernel[(1,)](x, 12, BLOCK=16, checked=True)
    assert info.value.loc.line == oob_atomic_kernel.starting_line_number + 3
    assert "out-of-bounds atomic" in str(info.value)
