"""Kernels for the numerical and interpreter tests, built by hand with
`ir.builder.Builder` (independent of the frontend), and small helpers to build them.
`run` executes on the interpreter; the numerical suite (tests/numerics) launches with
`numerics_backends.run` instead, on whichever backend the test is parametrized with."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from tegula.backends.interpreter import execute
from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.core import Block, Kernel, Loc, Value
from tegula.ir.ops import OP_INFO, Op
from tegula.ir.types import I1, I32, PointerType, ScalarType, TileType
from tegula.ir.verifier import verify

SRC = "/tmp/tegula_interp_tests/kernel.py"


def tile(elem, *shape) -> TileType:
    return TileType(tuple(shape), elem)


def loc(line: int, col: int = 4) -> Loc:
    return Loc(SRC, line, col)


def ptrs(b: Builder, base: Value, offs: Value) -> Value:
    """`base + offs` as a tile of pointers (offs: an i32 tile)."""
    shape = offs.type.shape
    return b.op1(Op.ADDPTR, b.splat(base, shape), offs)


def load(b: Builder, p: Value, mask: Optional[Value] = None, other: Optional[Value] = None) -> Value:
    ops = [p] + ([mask] if mask is not None else []) + ([other] if other is not None else [])
    return b.op1(Op.LOAD, *ops, attrs=A.LoadAttrs(has_mask=mask is not None, has_other=other is not None))


def store(b: Builder, p: Value, v: Value, mask: Optional[Value] = None) -> None:
    ops = [p, v] + ([mask] if mask is not None else [])
    b.create(Op.STORE, ops, A.StoreAttrs(has_mask=mask is not None))


def row_major_offsets(b: Builder, shape: Sequence[int]) -> Value:
    """i32 offsets 0..numel-1 laid out in `shape` (row-major)."""
    n = int(np.prod(shape))
    flat = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, n))
    if len(shape) == 1:
        return flat
    return b.op1(Op.RESHAPE, flat, attrs=A.ShapeAttrs(tuple(shape)))


def build_map_kernel(op: Op, in_types: Sequence[ScalarType], out_type: ScalarType,
                     shape: Sequence[int] = (128,), attrs=None,
                     body: Optional[Callable[[Builder, list[Value]], Value]] = None) -> Kernel:
    """out[i] = op(in0[i], in1[i], ...) over one tile of `shape` (no mask)."""
    names = [f"in{i}" for i in range(len(in_types))] + ["out"]
    k = new_kernel(f"map_{op.value}", [PointerType(t) for t in in_types] + [PointerType(out_type)], names)
    b = Builder(k.body)
    b.loc = loc(2)
    offs = row_major_offsets(b, shape)
    vals = [load(b, ptrs(b, a, offs)) for a in k.args[:-1]]
    if body is not None:
        r = body(b, vals)
    else:
        result_type = tile(out_type, *shape) if op is Op.CAST or op is Op.BITCAST else None
        if attrs is None and OP_INFO[op].attrs is not None:
            attrs = OP_INFO[op].attrs()  # the attribute class's defaults
        r = b.op1(op, *vals, attrs=attrs, type=result_type)
    store(b, ptrs(b, k.args[-1], offs), r)
    b.create(Op.RETURN, [])
    verify(k)
    return k


def build_vector_add(block: int, elem: ScalarType = None) -> Kernel:
    """z[i] = x[i] + y[i] for i < n, BLOCK elements per program (the tutorial kernel)."""
    from tegula.ir.types import F32
    elem = elem or F32
    k = new_kernel("add_kernel", [PointerType(elem)] * 3 + [I32], ["x_ptr", "y_ptr", "out_ptr", "n"])
    x, y, out, n = k.args
    b = Builder(k.body)
    b.loc = loc(3)
    pid = b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(0))
    start = b.op1(Op.MUL, pid, b.constant(block, I32))
    offs = b.op1(Op.ADD, b.splat(start, (block,)), b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, block)))
    mask = b.op1(Op.LT, offs, b.splat(n, (block,)))
    b.loc = loc(5)
    xv = load(b, ptrs(b, x, offs), mask)
    b.loc = loc(6)
    yv = load(b, ptrs(b, y, offs), mask)
    b.loc = loc(7)
    store(b, ptrs(b, out, offs), b.op1(Op.ADD, xv, yv), mask)
    b.create(Op.RETURN, [])
    verify(k)
    return k


def build_for(b: Builder, lb: Value, ub: Value, step: Value, inits: list[Value], body_fn) -> list[Value]:
    """A `for` whose body is `body_fn(b, iv, iters) -> yielded values`."""
    body = Block()
    iv = body.add_arg(lb.type)
    iters = [body.add_arg(v.type) for v in inits]
    ins = b.create(Op.FOR, [lb, ub, step, *inits], regions=[body])
    with b.at_end_of(body):
        b.yield_(body_fn(b, iv, iters))
    return ins.results


def combine_region(elem_types: Sequence[ScalarType], body_fn) -> Block:
    """A reduce/scan region over `elem_types`: args (accs..., news...)."""
    region = Block()
    args = [region.add_arg(t) for t in list(elem_types) * 2]
    b = Builder(region)
    b.yield_(body_fn(b, args))
    return region


def build_matmul(M: int, N: int, K: int, BM: int, BN: int, BK: int, elem: ScalarType = None,
                 precision: str = "ieee") -> Kernel:
    """C = A @ B (row-major, f32 accumulator), the tutorial matmul with masks on K and
    on the output; grid (cdiv(M, BM) * cdiv(N, BN),) with row-major tile order."""
    from tegula.ir.types import F32
    elem = elem or F32
    k = new_kernel("matmul", [PointerType(elem), PointerType(elem), PointerType(F32), I32, I32, I32],
                   ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"])
    a_ptr, b_ptr, c_ptr, m_, n_, k_ = k.args
    b = Builder(k.body)
    b.loc = loc(10)
    pid = b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(0))
    grid_n = b.constant((N + BN - 1) // BN, I32)
    pid_m = b.op1(Op.IDIV, pid, grid_n)
    pid_n = b.op1(Op.REM, pid, grid_n)

    def col(v, n):  # (n,) -> (n, 1)
        return b.op1(Op.EXPAND_DIMS, v, attrs=A.ExpandDimsAttrs(1))

    def row(v, n):  # (n,) -> (1, n)
        return b.op1(Op.EXPAND_DIMS, v, attrs=A.ExpandDimsAttrs(0))

    def bcast(v, shape):
        return b.broadcast(v, shape)

    def iota(n):
        return b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, n))

    offs_m = b.op1(Op.ADD, b.splat(b.op1(Op.MUL, pid_m, b.constant(BM, I32)), (BM,)), iota(BM))
    offs_n = b.op1(Op.ADD, b.splat(b.op1(Op.MUL, pid_n, b.constant(BN, I32)), (BN,)), iota(BN))
    offs_k = iota(BK)
    # rows/columns past M/N wrap around for the loads (the tutorial's `% M`)
    offs_am = b.op1(Op.REM, offs_m, b.splat(m_, (BM,)))
    offs_bn = b.op1(Op.REM, offs_n, b.splat(n_, (BN,)))
    # a_ptrs = a + offs_am[:, None] * K + offs_k[None, :]
    am = bcast(b.op1(Op.MUL, col(offs_am, BM), b.splat(k_, (BM, 1))), (BM, BK))
    a_off = b.op1(Op.ADD, am, bcast(row(offs_k, BK), (BM, BK)))
    a_ptrs0 = b.op1(Op.ADDPTR, b.splat(a_ptr, (BM, BK)), a_off)
    # b_ptrs = b + offs_k[:, None] * N + offs_bn[None, :]
    bk = bcast(b.op1(Op.MUL, col(offs_k, BK), b.splat(n_, (BK, 1))), (BK, BN))
    b_off = b.op1(Op.ADD, bk, bcast(row(offs_bn, BN), (BK, BN)))
    b_ptrs0 = b.op1(Op.ADDPTR, b.splat(b_ptr, (BK, BN)), b_off)
    acc0 = b.constant(0.0, tile(F32, BM, BN))
    zero, one = b.constant(0, I32), b.constant(1, I32)
    k_tiles = b.op1(Op.IDIV, b.op1(Op.ADD, k_, b.constant(BK - 1, I32)), b.constant(BK, I32))
    b_step = b.op1(Op.MUL, n_, b.constant(BK, I32))

    def body(lb: Builder, kk, iters):
        acc, ap, bp = iters
        lb.loc = loc(20)
        remaining = lb.op1(Op.SUB, k_, lb.op1(Op.MUL, kk, lb.constant(BK, I32)))
        kmask = lb.op1(Op.LT, offs_k, lb.splat(remaining, (BK,)))
        a_mask = lb.broadcast(lb.op1(Op.EXPAND_DIMS, kmask, attrs=A.ExpandDimsAttrs(0)), (BM, BK))
        b_mask = lb.broadcast(lb.op1(Op.EXPAND_DIMS, kmask, attrs=A.ExpandDimsAttrs(1)), (BK, BN))
        zero_a = lb.constant(0.0, tile(elem, BM, BK))
        zero_b = lb.constant(0.0, tile(elem, BK, BN))
        av = load(lb, ap, a_mask, zero_a)
        bv = load(lb, bp, b_mask, zero_b)
        lb.loc = loc(21)
        acc = lb.create(Op.DOT, [av, bv, acc], A.DotAttrs(precision)).result
        ap = lb.op1(Op.ADDPTR, ap, lb.splat(lb.constant(BK, I32), (BM, BK)))
        bp = lb.op1(Op.ADDPTR, bp, lb.splat(b_step, (BK, BN)))
        return [acc, ap, bp]

    acc, _, _ = build_for(b, zero, k_tiles, one, [acc0, a_ptrs0, b_ptrs0], body)
    b.loc = loc(30)
    c_off = b.op1(Op.ADD, bcast(b.op1(Op.MUL, col(offs_m, BM), b.splat(n_, (BM, 1))), (BM, BN)),
                  bcast(row(offs_n, BN), (BM, BN)))
    c_mask = b.op1(Op.AND, bcast(col(b.op1(Op.LT, offs_m, b.splat(m_, (BM,))), BM), (BM, BN)),
                   bcast(row(b.op1(Op.LT, offs_n, b.splat(n_, (BN,))), BN), (BM, BN)))
    store(b, b.op1(Op.ADDPTR, b.splat(c_ptr, (BM, BN)), c_off), acc, c_mask)
    b.create(Op.RETURN, [])
    verify(k)
    return k


def run(kernel: Kernel, grid, *args, debug: bool = False) -> None:
    g = tuple(grid) + (1,) * (3 - len(tuple(grid)))
    execute(kernel, g, list(args), debug=debug)


__all__ = ["I1", "SRC", "build_for", "build_map_kernel", "build_matmul", "build_vector_add",
           "combine_region", "load", "loc", "ptrs", "row_major_offsets", "run", "store", "tile"]
