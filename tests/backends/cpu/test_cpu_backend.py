"""The compiled CPU backend through the JIT path: selection by the knob, results against
numpy, bounds-checked accesses raising the interpreter's error, the thread pool, and the
compile error for an op it does not lower yet."""
import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cpu.lower import CpuLoweringError
from tegula.errors import OutOfBoundsError


@tegula.jit
def axpy(x, y, o, n, a, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(o + offs, a * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@tegula.jit
def softmax_rows(x, o, N, B: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, B)
    v = tl.load(x + r * N + offs, mask=offs < N, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(o + r * N + offs, e / tl.sum(e, axis=0), mask=offs < N)


@tegula.jit
def col_sums(x, o, M, N: tl.constexpr, BM: tl.constexpr):
    acc = tl.zeros([N], tl.int32)
    for i in range(0, M, BM):
        rows = i + tl.arange(0, BM)
        cols = tl.arange(0, N)
        t = tl.load(x + rows[:, None] * N + cols[None, :], mask=rows[:, None] < M, other=0)
        acc += tl.sum(t, axis=0)
    tl.store(o + tl.arange(0, N), acc)


@tegula.jit
def cumsum(x, o, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(o + offs, tl.cumsum(tl.load(x + offs), axis=0))


@tegula.jit
def printer(x, B: tl.constexpr):
    tl.device_print("x", tl.load(x + tl.arange(0, B)))


def test_runs_on_the_cpu_backend_and_matches_numpy(cpu):
    rng = np.random.default_rng(0)
    n = 10_007
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    o = np.zeros_like(x)
    k = axpy[(triton_cdiv(n, 256),)](x, y, o, n, 1.5, B=256)
    assert k.metadata.target.backend == "cpu"
    assert "define" in k.asm["llir"]
    np.testing.assert_allclose(o, 1.5 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_softmax_rows(cpu):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((37, 300)).astype(np.float32)
    o = np.zeros_like(x)
    softmax_rows[(37,)](x, o, 300, B=512)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(o, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_loop_carried_tile_and_2d_reduction_bitwise(cpu):
    rng = np.random.default_rng(2)
    x = rng.integers(-1000, 1000, (203, 16)).astype(np.int32)
    o = np.zeros(16, np.int32)
    col_sums[(1,)](x, o, 203, N=16, BM=32)
    np.testing.assert_array_equal(o, x.sum(0, dtype=np.int32))


def test_out_of_bounds_load_is_the_interpreters_error(cpu):
    x = np.random.rand(100).astype(np.float32)
    y = np.random.rand(300).astype(np.float32)
    o = np.zeros(300, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        axpy[(3,)](x, y, o, 300, 2.0, B=128)
    msg = str(info.value)
    assert "out-of-bounds load through pointer argument 'x'" in msg
    assert "buffer of 100 elements" in msg and "[100, 101, 102" in msg
    assert f"test_cpu_backend.py:{axpy.starting_line_number + 4}:" in msg and "program id" in msg


def test_out_of_bounds_store_names_the_output(cpu):
    x = np.random.rand(300).astype(np.float32)
    o = np.zeros(200, np.float32)
    with pytest.raises(OutOfBoundsError, match="store through pointer argument 'o'.*buffer of 200"):
        axpy[(3,)](x, x, o, 300, 2.0, B=128)


def test_many_programs_on_the_thread_pool(cpu, monkeypatch):
    monkeypatch.setenv("TEGULA_CPU_THREADS", "3")
    n = 100_003
    x = np.random.rand(n).astype(np.float32)
    o = np.zeros_like(x)
    axpy[(triton_cdiv(n, 64),)](x, x, o, n, -1.0, B=64)
    np.testing.assert_array_equal(o, np.zeros_like(x))


def test_device_print_lines(cpu, capfd):
    x = np.arange(4, dtype=np.int32) * 3
    printer[(1,)](x, B=4)
    lines = capfd.readouterr().out.splitlines()
    assert lines == [f"pid (0, 0, 0) idx ({i}) x: {3 * i}" for i in range(4)]


def test_an_op_it_cannot_lower_is_a_compile_error_naming_op_and_line():
    from tegula.backends.cpu.lower import lower
    from tegula.ir.builder import Builder, new_kernel
    from tegula.ir.core import Loc
    from tegula.ir.ops import Op
    from tegula.ir.types import I1
    k = new_kernel("stray", [I1], ["c"])
    b = Builder(k.body)
    ins = b.create(Op.CONDITION, [k.args[0]])
    ins.loc = Loc("kernel_file.py", 7)
    with pytest.raises(CpuLoweringError, match=r"kernel_file.py:7: .*cannot lower 'condition' in kernel 'stray'"):
        lower(k)


def test_scan_matches_the_interpreter_bitwise(cpu):
    x = np.random.default_rng(3).integers(-2**31, 2**31 - 1, 100, dtype=np.int64).astype(np.int32)
    o = np.zeros(128, np.int32)
    xp = np.zeros(128, np.int32)
    xp[:100] = x
    cumsum[(1,)](xp, o, B=128)
    np.testing.assert_array_equal(o, np.cumsum(xp, dtype=np.int32))


def test_interpret_forces_the_interpreter(cpu, monkeypatch):
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    x = np.arange(16, dtype=np.int32)
    o = np.zeros_like(x)
    cumsum[(1,)](x, o, B=16)
    np.testing.assert_array_equal(o, np.cumsum(x))


@tegula.jit
def histogram(x, h, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.atomic_add(h + tl.load(x + offs, mask=m, other=0), 1, mask=m)


@tegula.jit
def float_total(x, out, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.atomic_add(out, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0))


def test_atomics_are_atomic_across_concurrent_programs(cpu, monkeypatch):
    monkeypatch.setenv("TEGULA_CPU_THREADS", "4")
    rng = np.random.default_rng(4)
    n = 200_001
    x = rng.integers(0, 7, n).astype(np.int32)
    h = np.zeros(7, np.int32)
    histogram[(triton_cdiv(n, 32),)](x, h, n, B=32)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=7))
    # float adds: every contribution lands (the order differs, so compare loosely)
    v = rng.random(n).astype(np.float32)
    t = np.zeros(1, np.float32)
    float_total[(triton_cdiv(n, 64),)](v, t, n, B=64)
    assert abs(float(t[0]) - float(v.astype(np.float64).sum())) < 1e-3 * n ** 0.5


@tegula.jit
def chained_prefix(x, flags, o, CAP: tl.constexpr):
    # a decoupled look-back in miniature: program p spins on program p-1's published
    # running total (a volatile load of a flag another thread stores), as FlagGems'
    # radix sort does; the spin is capped so that a load hoisted out of the loop fails
    # the comparison instead of hanging the test
    pid = tl.program_id(0)
    total = tl.load(x + pid)
    if pid > 0:
        prev = tl.load(flags + pid - 1, volatile=True)
        tries = 0
        while (prev == 0) & (tries < CAP):
            prev = tl.load(flags + pid - 1, volatile=True)
            tries += 1
        total += prev
    tl.store(flags + pid, total)
    tl.store(o + pid, total)


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.int64])
def test_volatile_load_in_a_spin_loop_rereads_memory(cpu, monkeypatch, dtype):
    monkeypatch.setenv("TEGULA_CPU_THREADS", "2")
    n = 96
    x = np.arange(1, n + 1).astype(dtype)
    flags = np.zeros(n, dtype)
    o = np.zeros(n, dtype)
    chained_prefix[(n,)](x, flags, o, CAP=2**30)
    np.testing.assert_array_equal(o, np.cumsum(x))


@tegula.jit
def desc_axpy(pair, x_desc, o_desc, BM: tl.constexpr, BN: tl.constexpr):
    a, (b, _unused) = pair
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    o_desc.store([m, n], a * x_desc.load([m, n]) + b)


def test_tuple_and_host_descriptor_arguments(cpu):
    from tegula.tools.tensor_descriptor import TensorDescriptor

    rng = np.random.default_rng()
    x = rng.standard_normal((21, 36)).astype(np.float32)[:, :30]
    o = np.zeros((21, 36), np.float32)
    desc_axpy[(2, 1)](((2.0, (0.5, None))), TensorDescriptor.from_tensor(x, [16, 32]),
                      TensorDescriptor(o, [21, 30], [36, 1], [16, 32]), 16, 32)
    np.testing.assert_allclose(o[:, :30], 2 * x + 0.5, rtol=1e-6)
    assert (o[:, 30:] == 0).all()
