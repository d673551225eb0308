"""The CPU backend's row-kernel paths against the interpreter, on fresh random inputs:
an expensive value with several users computed inside the reduction that first reads
it (softmax's exp and sum in one loop), reductions specialized to all-true masks, and
masks whose all-true test is one scalar comparison (bound checks of index ranges, with
ranges that wrap around the integer type)."""
import numpy as np
import pytest

import tegula
import tegula.language as tl


def both(monkeypatch, launch):
    """Run `launch()` on the CPU backend, then on the interpreter; both results."""
    got = launch()
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    ref = launch()
    monkeypatch.delenv("TEGULA_INTERPRET")
    return got, ref


@tegula.jit
def softmax(x, o, N, B: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, B)
    v = tl.load(x + r * N + offs, mask=offs < N, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(o + r * N + offs, e / tl.sum(e, axis=0), mask=offs < N)


@tegula.jit
def layer_norm(x, w, b, o, N, eps, B: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, B)
    m = offs < N
    v = tl.load(x + r * N + offs, mask=m, other=0.0)
    mean = tl.sum(v, axis=0) / N
    d = tl.where(m, v - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    tl.store(o + r * N + offs, d * rstd * tl.load(w + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@pytest.mark.parametrize("n", [1, 100, 128, 1000])
def test_softmax_and_layer_norm_match_the_interpreter(cpu, monkeypatch, n):
    """Rows shorter than the block (masks partly false: the general loops) and exactly
    one block long (all true: the specialized ones). Within the f32 exp bound and the
    reordered sums' bound (docs/numerics.md), far inside rtol 1e-5."""
    rng = np.random.default_rng()
    rows, blk = 37, 1 << max(n - 1, 1).bit_length()
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    def run_softmax():
        o = np.empty_like(x)
        softmax[(rows,)](x, o, n, B=blk)
        return o

    def run_layer_norm():
        o = np.empty_like(x)
        layer_norm[(rows,)](x, w, b, o, n, 1e-5, B=blk)
        return o
    got, ref = both(monkeypatch, run_softmax)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-30)
    got, ref = both(monkeypatch, run_layer_norm)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@tegula.jit
def reused(x, o, i, n, B: tl.constexpr):
    """`e` is expensive and has several users: an argmax (two operands), a 2-D column
    sum, a loop that reads it, and a plain store."""
    r = tl.arange(0, B)
    v = tl.load(x + r, mask=r < n, other=0.0)
    e = tl.exp(v)
    idx = tl.argmax(e, axis=0)
    cols = tl.sum(tl.reshape(e, (B // 8, 8)), axis=0)
    acc = tl.zeros([B], tl.float32)
    for k in range(3):
        acc += e * k
    tl.store(o + r, acc, mask=r < n)
    tl.store(o + B + tl.arange(0, 8), cols)
    tl.store(o + B + 8, tl.sum(e, axis=0))
    tl.store(i, idx)


def test_expensive_value_with_several_users(cpu, monkeypatch):
    rng = np.random.default_rng()
    x = rng.standard_normal(64).astype(np.float32)

    def launch():
        o = np.zeros(64 + 9, np.float32)
        i = np.zeros(1, np.int32)
        reused[(1,)](x, o, i, 61, B=64)
        return o, i
    (got, gi), (ref, ri) = both(monkeypatch, launch)
    np.testing.assert_array_equal(gi, ri)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


@tegula.jit
def masked_copy(x, o, base, lo, n, B: tl.constexpr, FLIP: tl.constexpr):
    """Masks of the forms mask_facts reads: a bound check of base + arange (which may
    wrap around i32), written either way round, and the & of two."""
    offs = base + tl.arange(0, B)
    if FLIP:
        m = (n > offs) & (offs >= lo)
    else:
        m = (offs < n) & (lo <= offs)
    p = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + p, tl.load(x + p, mask=m, other=-1), mask=m)


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("base,lo,n", [(0, 0, 64), (0, 0, 63), (5, 6, 100), (-64, -70, 0),
                                       (2**31 - 64, 0, 2**31 - 1), (2**31 - 40, 0, 2**31 - 1),
                                       (2**31 - 40, -2**31, 2**31 - 1), (-2**31, -2**31, 0)])
def test_masks_with_scalar_all_true_tests(cpu, monkeypatch, flip, base, lo, n):
    x = np.random.default_rng().integers(0, 1000, 64, dtype=np.int32)

    def launch():
        o = np.full(64, 7, np.int32)
        masked_copy[(1,)](x, o, base, lo, n, B=64, FLIP=flip)
        return o
    got, ref = both(monkeypatch, launch)
    np.testing.assert_array_equal(got, ref)


@tegula.jit
def carried(a, b, o, K, B: tl.constexpr):
    """Loop-carried tiles: an accumulator the dot updates in place, a pair swapped by
    the yield, and an accumulator also read after its dot (not updated in place)."""
    r = tl.arange(0, B)
    x = tl.load(a + r[:, None] * B + r[None, :])
    y = tl.load(b + r[:, None] * B + r[None, :])
    acc = tl.zeros([B, B], tl.float32)
    old = tl.zeros([B, B], tl.float32)
    p, q = x, y
    for k in range(K):
        new = tl.dot(p, q, old)
        acc = tl.dot(x, y, acc)
        old = old + new * 0.5
        p, q = q, p
    tl.store(o + r[:, None] * B + r[None, :], acc)
    tl.store(o + B * B + r[:, None] * B + r[None, :], old)
    tl.store(o + 2 * B * B + r[:, None] * B + r[None, :], p - q)


def test_loop_carried_tiles(cpu, monkeypatch):
    rng = np.random.default_rng()
    a, b = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))

    def launch():
        o = np.zeros(3 * 256, np.float32)
        carried[(1,)](a, b, o, 3, B=16)
        return o
    got, ref = both(monkeypatch, launch)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)  # f32 FMA chains vs exact sums


@pytest.mark.parametrize("registers", [16, 32])
def test_dot_register_block_fits(registers):
    """The dot's accumulator block, the b row it multiplies and a broadcast of a fit
    in the host's SIMD registers (16 on AVX2: no spills every k step), the rows divide
    the tile, and there are enough independent accumulators to hide the FMA latency."""
    from tegula.backends.cpu.lower_dot import register_block
    for m in (1, 2, 4, 16, 64, 128):
        for nvec in (1, 2, 4, 8, 16):
            rb, cb = register_block(m, nvec, registers)
            assert m % rb == 0 and nvec % cb == 0
            assert rb * cb + cb + 1 <= registers and rb * cb <= 16
            if m >= 16 and nvec >= 4:
                assert rb * cb >= 8


@tegula.jit
def tiled_matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(x, y, acc, input_precision="ieee")
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("registers", [16, 32])
@pytest.mark.parametrize("tiles", [(64, 64, 32), (16, 32, 16), (32, 16, 8)])
def test_dot_register_blocks_compute_the_product(cpu, monkeypatch, registers, tiles):
    """Either register block (AVX2's, AVX-512's) on this host gives the product: each
    element a chain of f32 FMAs over k, within the f32 bound of numpy's matmul."""
    from tegula.backends.llvm import host_jit
    monkeypatch.setattr(host_jit, "simd_registers", lambda: registers)
    monkeypatch.setenv("TEGULA_ALWAYS_COMPILE", "1")
    rng = np.random.default_rng()
    M, N, K = 64, 64, 64
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    BM, BN, BK = tiles
    tiled_matmul[(M // BM, N // BN)](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = K * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(c - ref) <= bound)
