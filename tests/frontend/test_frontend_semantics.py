"""The control flow the frontend builds computes what the Python source says: kernels
run on the reference interpreter and are compared with plain Python."""
from __future__ import annotations

import numpy as np
import pytest
from frontend_test_utils import build, jit

import tegula.language as tl
from tegula.backends.interpreter import execute


@jit
def range_sum(out_ptr, START: tl.constexpr, STOP: tl.constexpr, STEP: tl.constexpr):
    acc = 0
    count = 0
    for i in range(START, STOP, STEP):
        acc += i
        count += 1
    tl.store(out_ptr, acc)
    tl.store(out_ptr + 1, count)


@pytest.mark.parametrize("bounds", [(0, 10, 3), (10, 0, -3), (9, -1, -2), (5, 5, -1), (0, 10, -1),
                                    (-4, 4, 1)])
def test_range_with_constexpr_steps_of_either_sign(bounds):
    start, stop, step = bounds
    kernel = build(range_sum, {"out_ptr": "*i32"}, {"START": start, "STOP": stop, "STEP": step})
    out = np.zeros(2, np.int32)
    execute(kernel, (1, 1, 1), [out])
    expected = list(range(start, stop, step))
    assert out.tolist() == [sum(expected), len(expected)]


@jit
def _sign(x):
    if x > 0:
        return 1
    elif x < 0:
        return -1
    return 0


@jit
def early_exits(out_ptr, vals_ptr, n):
    pid = tl.program_id(0)
    if pid >= n:
        return
    v = tl.load(vals_ptr + pid)
    tl.store(out_ptr + pid, _sign(v) * 10 + (v if v > 2 else -v))


def test_early_returns_in_kernel_and_callee():
    kernel = build(early_exits, {"out_ptr": "*i32", "vals_ptr": "*i32", "n": "i32"})
    vals = np.array([-3, 0, 2, 7, 5, 6], np.int32)
    out = np.full(6, 123, np.int32)
    execute(kernel, (6, 1, 1), [out, vals, 4])
    expected = [(v > 0) * 10 - (v < 0) * 10 + (v if v > 2 else -v) for v in vals[:4].tolist()]
    assert out.tolist() == expected + [123, 123]


@jit
def while_and_tuples(out_ptr, n):
    i = 1
    steps = 0
    while i < n:
        i = i * 3
        steps += 1
    pair = (0, 1)
    for _ in range(steps):
        pair = (pair[1], pair[0] + pair[1])
    total = 0
    for k in tl.static_range(4):
        if k % 2 == 0:
            total += k
    tl.store(out_ptr, i)
    tl.store(out_ptr + 1, pair[0])
    tl.store(out_ptr + 2, total)


@pytest.mark.parametrize("n", [0, 1, 2, 10, 100])
def test_while_tuple_carried_and_static_range(n):
    kernel = build(while_and_tuples, {"out_ptr": "*i32", "n": "i32"})
    out = np.zeros(3, np.int32)
    execute(kernel, (1, 1, 1), [out, n])
    i, steps = 1, 0
    while i < n:
        i, steps = i * 3, steps + 1
    a, b = 0, 1
    for _ in range(steps):
        a, b = b, a + b
    assert out.tolist() == [i, a, 0 + 2]
