"""Structured control flow: for (positive, negative, empty, zero step, i64), iter-arg
swaps, if with results, while, early return, grid order, program ids."""
from __future__ import annotations

import numpy as np
import pytest
from interp_test_kernels import build_for, loc, store
from numerics_backends import is_compiled, run

from tegula.errors import KernelRuntimeError
from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.core import Block
from tegula.ir.ops import Op
from tegula.ir.types import I32, I64, PointerType
from tegula.ir.verifier import verify


def loop_kernel(iv_type=I32):
    """out[0] = sum of iv over `for iv in range(lb, ub, step)`, out[1] = trip count."""
    k = new_kernel("loop", [PointerType(iv_type), iv_type, iv_type, iv_type], ["out", "lb", "ub", "step"])
    out, lb, ub, st = k.args
    b = Builder(k.body)
    b.loc = loc(60)
    zero, one = b.constant(0, iv_type), b.constant(1, iv_type)

    def body(lb_, iv, iters):
        return [lb_.op1(Op.ADD, iters[0], iv), lb_.op1(Op.ADD, iters[1], one)]
    total, count = build_for(b, lb, ub, st, [zero, zero], body)
    store(b, out, total)
    store(b, b.op1(Op.ADDPTR, out, one), count)
    b.create(Op.RETURN, [])
    verify(k)
    return k


@pytest.mark.parametrize("lb,ub,step", [(0, 10, 1), (3, 50, 7), (10, 0, -1), (17, -20, -4),
                                        (5, 5, 1), (5, 0, 1)])
def test_for_loop_bounds_and_negative_steps(lb, ub, step):
    out = np.zeros(2, np.int32)
    run(loop_kernel(), (1,), out, lb, ub, step)
    r = list(range(lb, ub, step))
    assert out.tolist() == [sum(r), len(r)]


def test_for_loop_with_i64_induction_variable():
    out = np.zeros(2, np.int64)
    lb = 2 ** 40 + int(np.random.default_rng().integers(0, 100))
    run(loop_kernel(I64), (1,), out, lb, lb + 30, 3)
    r = list(range(lb, lb + 30, 3))
    assert out.tolist() == [sum(r), len(r)]


def test_for_loop_with_zero_step_is_an_error():
    # the interpreter always diagnoses a zero step; compiled code only in checked mode
    # (otherwise a zero step is undefined, as in Triton)
    with pytest.raises(KernelRuntimeError, match="step of 0") as info:
        run(loop_kernel(), (1,), np.zeros(2, np.int32), 0, 10, 0, debug=is_compiled())
    assert info.value.loc.line == 60


def test_iter_args_swap():
    """(a, b) = (b, a + b) nine times: Fibonacci, checks yield reads before writes."""
    k = new_kernel("fib", [PointerType(I32)], ["out"])
    (out,) = k.args
    b = Builder(k.body)
    zero, one, nine = b.constant(0, I32), b.constant(1, I32), b.constant(9, I32)
    a, _ = build_for(b, zero, nine, one, [zero, one],
                     lambda lb, iv, it: [it[1], lb.op1(Op.ADD, it[0], it[1])])
    store(b, out, a)
    b.create(Op.RETURN, [])
    verify(k)
    res = np.zeros(1, np.int32)
    run(k, (1,), res)
    assert res[0] == 34


def test_if_with_results_per_program():
    """out[pid] = pid * 10 if pid is odd else -pid."""
    k = new_kernel("branch", [PointerType(I32)], ["out"])
    (out,) = k.args
    b = Builder(k.body)
    pid = b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(0))
    odd = b.op1(Op.EQ, b.op1(Op.AND, pid, b.constant(1, I32)), b.constant(1, I32))
    ins = b.create(Op.IF, [odd], result_types=[I32], regions=[Block(), Block()])
    with b.at_end_of(ins.regions[0]):
        b.yield_([b.op1(Op.MUL, pid, b.constant(10, I32))])
    with b.at_end_of(ins.regions[1]):
        b.yield_([b.op1(Op.NEG, pid)])
    store(b, b.op1(Op.ADDPTR, out, pid), ins.result)
    b.create(Op.RETURN, [])
    verify(k)
    res = np.zeros(9, np.int32)
    run(k, (9,), res)
    assert res.tolist() == [p * 10 if p % 2 else -p for p in range(9)]


def test_while_loop_collatz_steps():
    k = new_kernel("collatz", [PointerType(I32), I32], ["out", "start"])
    out, start = k.args
    b = Builder(k.body)
    zero, one, two, three = (b.constant(v, I32) for v in (0, 1, 2, 3))
    before, after = Block(), Block()
    bx, bn = before.add_arg(I32), before.add_arg(I32)
    wl = b.create(Op.WHILE, [start, zero], result_types=[I32, I32], regions=[before, after])
    with b.at_end_of(before):
        b.create(Op.CONDITION, [b.op1(Op.NE, bx, one), bx, bn])
    ax, an = after.add_arg(I32), after.add_arg(I32)
    with b.at_end_of(after):
        even = b.op1(Op.EQ, b.op1(Op.REM, ax, two), zero)
        nxt = b.op1(Op.SELECT, even, b.op1(Op.IDIV, ax, two), b.op1(Op.ADD, b.op1(Op.MUL, ax, three), one))
        b.yield_([nxt, b.op1(Op.ADD, an, one)])
    store(b, out, wl.results[1])
    b.create(Op.RETURN, [])
    verify(k)
    n0 = int(np.random.default_rng().integers(2, 10_000))
    steps, n = 0, n0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    res = np.zeros(1, np.int32)
    run(k, (1,), res, n0)
    assert res[0] == steps


def test_return_inside_if_ends_only_that_program():
    """Programs with pid >= limit return before their store."""
    k = new_kernel("early", [PointerType(I32), I32], ["out", "limit"])
    out, limit = k.args
    b = Builder(k.body)
    pid = b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(0))
    ins = b.create(Op.IF, [b.op1(Op.GE, pid, limit)], result_types=[], regions=[Block(), Block()])
    with b.at_end_of(ins.regions[0]):
        b.create(Op.RETURN, [])
    with b.at_end_of(ins.regions[1]):
        b.yield_([])
    store(b, b.op1(Op.ADDPTR, out, pid), b.op1(Op.ADD, pid, b.constant(100, I32)))
    b.create(Op.RETURN, [])
    res = np.zeros(8, np.int32)
    run(k, (8,), res, 5)
    assert res.tolist() == [100, 101, 102, 103, 104, 0, 0, 0]


def test_program_ids_and_num_programs():
    """Each program stores (pid x, y, z, num_programs x, y, z) at its linear index."""
    k = new_kernel("grid", [PointerType(I32)], ["out"])
    (out,) = k.args
    b = Builder(k.body)
    pids = [b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(a)) for a in range(3)]
    nps = [b.op1(Op.NUM_PROGRAMS, attrs=A.AxisAttrs(a)) for a in range(3)]
    yz = b.op1(Op.ADD, pids[1], b.op1(Op.MUL, nps[1], pids[2]))
    lin = b.op1(Op.ADD, pids[0], b.op1(Op.MUL, nps[0], yz))
    base = b.op1(Op.MUL, lin, b.constant(6, I32))
    for i, v in enumerate(pids + nps):
        store(b, b.op1(Op.ADDPTR, out, b.op1(Op.ADD, base, b.constant(i, I32))), v)
    b.create(Op.RETURN, [])
    verify(k)
    gx, gy, gz = 3, 2, 2
    res = np.zeros(gx * gy * gz * 6, np.int32)
    run(k, (gx, gy, gz), res)
    rows = res.reshape(-1, 6)
    expected = [[x, y, z, gx, gy, gz] for z in range(gz) for y in range(gy) for x in range(gx)]
    assert rows.tolist() == expected
