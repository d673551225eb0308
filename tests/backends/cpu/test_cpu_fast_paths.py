"""The CPU backend's fast paths against the reference: fused elementwise chains, the
contiguous-row accesses proven by the axis analysis (and their fallback to per-element
checks at a buffer's end, with the interpreter's error), and the inline vectorizable
f32 exp (within 1 ulp of the exact result)."""
import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import OutOfBoundsError


@tegula.jit
def exp_kernel(x, o, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(o + offs, tl.exp(tl.load(x + offs, mask=m)), mask=m)


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    e = np.maximum(np.floor(np.log2(np.abs(exact), where=exact != 0, out=np.full(exact.shape, -200.0))), -126)
    return np.abs(got.astype(np.float64) - exact) / np.exp2(e - 23)


def test_exp_f32_within_one_ulp(cpu):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-110, 95, 1 << 18), rng.uniform(-1, 1, 1 << 18),
                        rng.uniform(-104, -86, 1 << 16), rng.uniform(88, 88.72, 1 << 16),
                        rng.uniform(-300, -100, 1 << 14), rng.uniform(88, 300, 1 << 14),
                        [-103.972, -103.97208, -149.0, -199.9, -200.0, -200.1, 199.9, 200.1],
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 88.7228, 88.7229, -87.33654, -103.97, 1e-30]])
    x = x.astype(np.float32)
    o = np.empty_like(x)
    exp_kernel[(triton_cdiv(x.size, 1024),)](x, o, x.size, B=1024)
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
        finite = exact < float(np.finfo(np.float32).max)
        assert _ulps(o[finite], exact[finite]).max() <= 1.0
        special = ~finite & ~np.isnan(x)
        np.testing.assert_array_equal(o[special], exact[special].astype(np.float32))
    assert np.isnan(o[np.isnan(x)]).all()


@tegula.jit
def chain(x, y, o, n, a, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    u = tl.load(x + offs, mask=m, other=1.0)
    v = tl.load(y + offs, mask=m, other=2.0)
    w = u * a + v          # cheap ops, fused into the store
    z = tl.where(w > 0, w, -w) / (v + 3.0)   # a division used once: fused too
    tl.store(o + offs, z + (offs % 7).to(tl.float32), mask=m)


@pytest.mark.parametrize("checks", ["1", "0"])
def test_fused_chain_matches_interpreter(cpu, monkeypatch, checks):
    monkeypatch.setenv("TEGULA_CPU_BOUNDS_CHECK", checks)
    rng = np.random.default_rng(1)
    n = 10_000
    x, y = rng.standard_normal(n).astype(np.float32), rng.random(n).astype(np.float32)
    got = np.empty_like(x)
    chain[(triton_cdiv(n, 512),)](x, y, got, n, 1.5, B=512)
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    ref = np.empty_like(x)
    chain[(triton_cdiv(n, 512),)](x, y, ref, n, 1.5, B=512)
    np.testing.assert_array_equal(got, ref)


@tegula.jit
def tile_copy(a, o, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    t = tl.load(a + rm[:, None] * stride + rn[None, :])
    tl.store(o + rm[:, None] * N + rn[None, :], t * 2)


def test_contiguous_rows_and_out_of_bounds_at_the_end(cpu):
    a = np.arange(64 * 48, dtype=np.int32).reshape(64, 48)
    o = np.zeros((64, 32), np.int32)
    tile_copy[(4, 2)](a, o, 64, 32, 48, BM=16, BN=16)
    np.testing.assert_array_equal(o, a[:, :32] * 2)
    # the last row block of the second column block reads past a 64x40 buffer: every
    # row is contiguous, but the range check fails and the per-element path reports
    b = np.arange(64 * 40, dtype=np.int32)
    with pytest.raises(OutOfBoundsError, match="out-of-bounds load through pointer argument 'a'"):
        tile_copy[(4, 3)](b, np.zeros((64, 48), np.int32), 64, 48, 40, BM=16, BN=16)


def triton_cdiv(a, b):
    return (a + b - 1) // b


@tegula.jit
def scale(x, o, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + offs, tl.load(x + offs) * 2.0, mask=offs < n)


def test_object_code_in_the_disk_cache_and_asm_stages(cpu, monkeypatch, tmp_path):
    """The CPU stages are llir, host asm and object code; a second process (here: a new
    JIT function) loads the object code from the disk cache, without the IR, and still
    reports an out-of-bounds access with the kernel's line."""
    monkeypatch.setenv("TEGULA_CACHE_DIR", str(tmp_path))
    x = np.arange(100, dtype=np.float32)
    o = np.zeros_like(x)
    first = tegula.jit(scale.fn)
    k = first.warmup(x, o, 100, B=64, grid=(2,))
    assert {"llir", "asm", "obj"} <= set(k.asm) and isinstance(k.asm["obj"], bytes)
    assert k.metadata.target.backend == "cpu"
    again = tegula.jit(scale.fn)
    again[(1,)](x, o, 100, B=64)
    loaded = next(iter(again.kernel_cache.values()))
    assert loaded.ir is None and loaded.asm["obj"] == k.asm["obj"]
    np.testing.assert_array_equal(o[:64], x[:64] * 2)
    with pytest.raises(OutOfBoundsError, match=r"test_cpu_fast_paths.py:\d+"):
        again[(2,)](x, o, 100, B=64)


@tegula.jit
def row_max(x, o, N: tl.constexpr, B: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, B)
    v = tl.load(x + r * N + offs, mask=offs < N, other=-float("inf"))
    tl.store(o + r, tl.max(v, axis=0))
    tl.store(o + tl.num_programs(0) + r, tl.min(v, axis=0))


@pytest.mark.parametrize("n", [2, 15, 16, 48, 1024])
def test_float_max_min_along_rows(cpu, n):
    """Float max/min along the last axis: partial results updated elementwise, folded
    pairwise (LLVM's own vectorized fmax reduction dropped a row's tail)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((7, n)).astype(np.float32)
    x[3, n // 2] = np.nan
    o = np.empty(14, np.float32)
    b = 1 << max(n - 1, 1).bit_length()
    row_max[(7,)](x, o, n, B=b)
    np.testing.assert_array_equal(o[:7], np.fmax.reduce(x, axis=1))
    expect_min = np.fmin.reduce(np.where(np.arange(b)[None, :] < n, np.pad(x, ((0, 0), (0, b - n))), -np.inf), axis=1)
    np.testing.assert_array_equal(o[7:], expect_min)


@tegula.jit
def shift_double(a, b, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(b + offs, tl.load(a + offs, mask=m) * 2.0, mask=m)


def test_loads_read_in_place_only_without_overlap(cpu):
    """A contiguous load from a buffer no store writes is read in place; when the
    written buffer overlaps it (b a shifted view of a), the launch sees it and the load
    copies first, as the interpreter's whole-tile load does."""
    a = np.arange(1, 129, dtype=np.float32)
    out = np.zeros(128, np.float32)
    shift_double[(1,)](a, out, 128, B=128)
    np.testing.assert_array_equal(out, a * 2)
    buf = np.arange(1, 130, dtype=np.float32)
    orig = buf.copy()
    shift_double[(1,)](buf[:128], buf[1:], 128, B=128)   # b[i] = a[i + 1]'s slot
    np.testing.assert_array_equal(buf, np.concatenate([orig[:1], orig[:128] * 2]))


@tegula.jit
def tanh_row_sums(x, o, N: tl.constexpr, B: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, B)
    v = tl.load(x + r * N + offs, mask=offs < N, other=0.0)
    # libdevice's tanh is not vectorized: the summed values arrive one at a time
    tl.store(o + r, tl.sum(tl.extra.libdevice.tanh(v), axis=0))


@tegula.jit
def column_sums(x, o, M, N: tl.constexpr, BM: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, N)
    v = tl.load(x + rows[:, None] * N + cols[None, :], mask=rows[:, None] < M, other=0.0)
    tl.store(o + cols, tl.sum(v, axis=0))


def test_long_float_sums_are_not_one_chain(cpu):
    """An f32 sum of 32000 values along a row, and of 4000 rows along a column, stays
    within a few units of float32 rounding of the float64 sum, as the GPU's (sequential
    runs per thread, then a tree) does: not the error of one chain of n - 1 additions
    (8e-6 relative before, liger-kernel's cross entropy missing its 1e-6 tolerance)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0.1, 1.0, (64, 32000)).astype(np.float32)
    o = np.empty(64, np.float32)
    tanh_row_sums[(64,)](x, o, 32000, B=32768)
    exact = np.tanh(x.astype(np.float64)).sum(axis=1)
    assert np.abs(o / exact - 1).max() < 5e-7

    y = rng.uniform(0.1, 1.0, (4000, 16)).astype(np.float32)
    c = np.empty(16, np.float32)
    column_sums[(1,)](y, c, 4000, N=16, BM=4096)
    assert np.abs(c / y.astype(np.float64).sum(axis=0) - 1).max() < 5e-7
