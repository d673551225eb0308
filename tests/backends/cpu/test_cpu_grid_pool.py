"""The CPU backend's grid executor (`backends/cpu/grid_pool.py`): every program runs once
whatever the thread count and grid size, programs of uneven cost included; launches from
several Python threads at once; the lowest failing program id is the one reported; the
`ThreadPoolExecutor` fallback and a forked child run the same grids."""
import os
import select
import threading

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import OutOfBoundsError


@tegula.jit
def count_runs(runs, work, B: tl.constexpr):
    # program p loops p % 7 times (uneven cost), then counts itself
    pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    acc = tl.zeros([B], tl.float32)
    for _ in range(pid % 7):
        acc += tl.load(work + tl.arange(0, B))
    tl.atomic_add(runs + pid, 1 + tl.sum(acc, axis=0).to(tl.int32) * 0)


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("grid", [(1,), (2,), (7,), (1001,), (37, 11)])
def test_every_program_runs_once(cpu, monkeypatch, threads, grid):
    monkeypatch.setenv("TEGULA_CPU_THREADS", str(threads))
    total = int(np.prod(grid))
    runs = np.zeros(total, np.int32)
    count_runs[grid](runs, np.random.rand(16).astype(np.float32), B=16)
    np.testing.assert_array_equal(runs, np.ones(total, np.int32))


@tegula.jit
def scale(x, o, n, a, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(o + offs, a * tl.load(x + offs, mask=m), mask=m)


def test_launches_from_several_threads_at_once(cpu, monkeypatch):
    # one launch holds the pool at a time; the others run on their own threads
    monkeypatch.setenv("TEGULA_CPU_THREADS", "2")
    rng = np.random.default_rng()
    failures = []

    def client(k):
        x = rng.standard_normal(10_007).astype(np.float32)
        o = np.zeros_like(x)
        for rep in range(20):
            scale[(triton_cdiv(x.size, 64),)](x, o, x.size, float(k + rep), B=64)
            if not np.array_equal(o, np.float32(k + rep) * x):
                failures.append((k, rep))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@tegula.jit
def read_from(x, o, first_bad, B: tl.constexpr):
    # programs >= first_bad read past x's end
    pid = tl.program_id(0)
    offs = tl.arange(0, B) + tl.where(pid >= first_bad, 10_000_000, 0)
    tl.store(o + pid * B + tl.arange(0, B), tl.load(x + offs))


@pytest.mark.parametrize("first_bad", [1, 333, 998])
def test_the_lowest_failing_program_is_reported(cpu, monkeypatch, first_bad):
    monkeypatch.setenv("TEGULA_CPU_THREADS", "3")
    x = np.zeros(16, np.float32)
    o = np.zeros(1000 * 16, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        read_from[(1000,)](x, o, first_bad, B=16)
    assert info.value.pid == (first_bad, 0, 0)


def test_the_executor_fallback_runs_the_same_grid(cpu, monkeypatch):
    from tegula.backends.cpu import backend

    monkeypatch.setenv("TEGULA_CPU_THREADS", "3")
    monkeypatch.setattr(backend, "grid_pool", lambda threads: None)
    runs = np.zeros(1001, np.int32)
    count_runs[(1001,)](runs, np.random.rand(16).astype(np.float32), B=16)
    np.testing.assert_array_equal(runs, np.ones(1001, np.int32))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_grids(cpu, monkeypatch):
    # the child has the parent's pools' memory but none of their workers
    monkeypatch.setenv("TEGULA_CPU_THREADS", "2")
    x = np.arange(5000, dtype=np.float32)
    o = np.zeros_like(x)
    scale[(79,)](x, o, x.size, 2.0, B=64)  # the parent's pool exists
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        ok = False
        try:
            o[:] = 0
            scale[(79,)](x, o, x.size, 3.0, B=64)
            ok = bool(np.array_equal(o, 3 * x))
        finally:
            os.write(write_end, b"1" if ok else b"0")
            os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 120)
    if not ready:
        os.kill(pid, 9)
    answer = os.read(read_end, 1) if ready else b"hung"
    os.waitpid(pid, 0)
    assert answer == b"1"


def triton_cdiv(a, b):
    return (a + b - 1) // b
