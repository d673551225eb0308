"""Hand-built tile-IR kernels (with `ir.builder.Builder`) that exercise the CUDA
backend, each with inputs and a numpy reference: the corpus of the CUDA backend tests
and of `benchmarks/gpu_smoke.py` (`all_cases()`). Part 1: memory, elementwise,
reductions, scans, views; part 2 is `cuda_kernels_more`."""
from __future__ import annotations

import numpy as np
from cuda_kernel_builder import KB, SRC, Case, P, add_fn, max_fn, tile_offsets  # noqa: F401  (re-exported)
from cuda_kernels_more import (  # noqa: F401  (re-exported)
    bf16_io,
    cache_hints,
    casts,
    casts_rtz,
    device_print,
    dot,
    i64_offsets,
    if_tiles,
    if_while,
    int_ops,
    join_split,
    linear_recurrence,
    loop_sum,
    math_ops,
    narrow_reductions,
    out_of_bounds,
    pointer_loop,
    softmax_rows,
)

from tegula.ir import attrs as A
from tegula.ir.builder import Builder
from tegula.ir.core import Value
from tegula.ir.ops import Op
from tegula.ir.types import F16, F32, I1, I32, I64, TileType  # noqa: F401  (re-exported)


def vector_add(block: int = 1024, n: int = 5000, dtype=F32) -> Case:
    kb = KB("add_kernel", [("x", P(dtype), 16), ("y", P(dtype), 16), ("out", P(dtype), 16), ("n", I32, 1)])
    offs = kb.op(Op.ADD, kb.splat(kb.op(Op.MUL, kb.pid(), kb.const(block, I32)), (block,)), kb.arange(block))
    mask = kb.op(Op.LT, offs, kb.splat(kb.a["n"], (block,)))
    x = kb.load(kb.ptrs(kb.a["x"], offs), mask)
    y = kb.load(kb.ptrs(kb.a["y"], offs), mask)
    kb.store(kb.ptrs(kb.a["out"], offs), kb.op(Op.ADD, x, y), mask)
    np_t = np.float16 if dtype == F16 else np.float32

    def inputs(rng):
        x, y = rng.standard_normal(n).astype(np_t), rng.standard_normal(n).astype(np_t)
        return [x, y, np.zeros(n, np_t), n]
    return Case(f"add_{dtype}_{block}", kb.done(), ((n + block - 1) // block, 1, 1), inputs, [2],
                lambda a: {2: (a[0] + a[1]).astype(np_t)})


def softmax(rows: int = 8, cols: int = 1000, block: int = 1024, num_warps: int = 4) -> Case:
    kb = KB("softmax_kernel", [("x", P(F32), 16), ("out", P(F32), 16), ("stride", I32, 16), ("n", I32, 1)])
    row = kb.op(Op.MUL, kb.pid(), kb.a["stride"])
    cols_t = kb.arange(block)
    offs = kb.op(Op.ADD, kb.splat(row, (block,)), cols_t)
    mask = kb.op(Op.LT, cols_t, kb.splat(kb.a["n"], (block,)))
    ninf = kb.const(float("-inf"), TileType((block,), F32))
    x = kb.load(kb.ptrs(kb.a["x"], offs), mask, ninf)
    (m,) = kb.reduce([x], 0, max_fn)
    z = kb.op(Op.SUB, x, kb.splat(m, (block,)))
    e = kb.op(Op.EXP, z)
    (s,) = kb.reduce([e], 0, add_fn)
    y = kb.op(Op.DIV, e, kb.splat(s, (block,)))
    kb.store(kb.ptrs(kb.a["out"], offs), y, mask)

    def inputs(rng):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        return [x, np.zeros((rows, cols), np.float32), cols, cols]

    def ref(a):
        x = a[0].astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        return {1: (e / e.sum(1, keepdims=True)).astype(np.float32)}
    return Case(f"softmax_{cols}_w{num_warps}", kb.done(), (rows, 1, 1), inputs, [1], ref,
                num_warps=num_warps, rtol=1e-5, atol=1e-7)


def row_sum_2d(bm: int = 16, bn: int = 64, axis: int = 1) -> Case:
    """A 2-D tile reduced along `axis` (tests slice layouts and cross-warp reductions)."""
    kb = KB(f"rowsum{axis}", [("x", P(F32), 16), ("out", P(F32), 16)])
    rm = kb.expand(kb.arange(bm), 1)
    rn = kb.expand(kb.arange(bn), 0)
    offs = kb.op(Op.ADD, kb.bcast(kb.op(Op.MUL, rm, kb.const(bn, TileType((bm, 1), I32))), (bm, bn)),
                 kb.bcast(rn, (bm, bn)))
    x = kb.load(kb.ptrs(kb.a["x"], offs))
    (s,) = kb.reduce([x], axis, add_fn)
    n_out = bm if axis == 1 else bn
    kb.store(kb.ptrs(kb.a["out"], kb.arange(n_out)), s)

    def inputs(rng):
        return [rng.standard_normal((bm, bn)).astype(np.float32), np.zeros(n_out, np.float32)]
    return Case(f"sum_axis{axis}_{bm}x{bn}", kb.done(), (1, 1, 1), inputs, [1],
                lambda a: {1: a[0].astype(np.float64).sum(axis).astype(np.float32)}, rtol=1e-5, atol=1e-5)


def argmax(n: int = 512) -> Case:
    kb = KB("argmax_kernel", [("x", P(F32), 16), ("out", P(I32), 16), ("n", I32, 1)])
    idx = kb.arange(n)
    mask = kb.op(Op.LT, idx, kb.splat(kb.a["n"], (n,)))
    x = kb.load(kb.ptrs(kb.a["x"], idx), mask, kb.const(float("-inf"), TileType((n,), F32)))

    def fn(b: Builder, a: list[Value]) -> list[Value]:
        v1, i1, v2, i2 = a
        gt = b.op1(Op.GT, v1, v2)
        eq = b.op1(Op.EQ, v1, v2)
        lt_i = b.op1(Op.LT, i1, i2)
        take1 = b.op1(Op.OR, gt, b.op1(Op.AND, eq, lt_i))
        return [b.op1(Op.SELECT, take1, v1, v2), b.op1(Op.SELECT, take1, i1, i2)]
    _v, i = kb.reduce([x, idx], 0, fn)
    kb.store(kb.a["out"], i)

    def inputs(rng):
        x = rng.standard_normal(n).astype(np.float32)
        x[n // 3] = x[2 * n // 3] = 10.0  # a tie: the first index wins
        return [x, np.zeros(1, np.int32), n - 7]
    return Case(f"argmax_{n}", kb.done(), (1, 1, 1), inputs, [1],
                lambda a: {1: np.array([np.argmax(a[0][:a[2]])], np.int32)})


def cumsum(shape=(256,), axis: int = 0, reverse: bool = False, num_warps: int = 4, dtype=I32) -> Case:
    kb = KB("cumsum", [("x", P(dtype), 16), ("out", P(dtype), 16)])
    if len(shape) == 1:
        offs = kb.arange(shape[0])
    else:
        m, n = shape
        rm = kb.bcast(kb.op(Op.MUL, kb.expand(kb.arange(m), 1), kb.const(n, TileType((m, 1), I32))), shape)
        offs = kb.op(Op.ADD, rm, kb.bcast(kb.expand(kb.arange(n), 0), shape))
    x = kb.load(kb.ptrs(kb.a["x"], offs))
    (c,) = kb.scan([x], axis, add_fn, reverse)
    kb.store(kb.ptrs(kb.a["out"], offs), c)
    np_t = np.int32 if dtype == I32 else np.float32

    def inputs(rng):
        return [rng.integers(-100, 100, shape).astype(np_t), np.zeros(shape, np_t)]

    def ref(a):
        x = a[0]
        if reverse:
            return {1: np.flip(np.cumsum(np.flip(x, axis), axis), axis).astype(np_t)}
        return {1: np.cumsum(x, axis).astype(np_t)}
    tag = "x".join(map(str, shape))
    return Case(f"cumsum_{tag}_ax{axis}{'_rev' if reverse else ''}_w{num_warps}", kb.done(), (1, 1, 1),
                inputs, [1], ref, num_warps=num_warps)


def transpose(bm: int = 32, bn: int = 64) -> Case:
    kb = KB("transpose", [("x", P(F32), 16), ("out", P(F32), 16)])
    rm = kb.expand(kb.arange(bm), 1)
    rn = kb.expand(kb.arange(bn), 0)
    offs = kb.op(Op.ADD, kb.bcast(kb.op(Op.MUL, rm, kb.const(bn, TileType((bm, 1), I32))), (bm, bn)),
                 kb.bcast(rn, (bm, bn)))
    x = kb.load(kb.ptrs(kb.a["x"], offs))
    xt = kb.op(Op.PERMUTE, x, attrs=A.PermuteAttrs((1, 0)))
    tm = kb.expand(kb.arange(bn), 1)
    tn = kb.expand(kb.arange(bm), 0)
    toffs = kb.op(Op.ADD, kb.bcast(kb.op(Op.MUL, tm, kb.const(bm, TileType((bn, 1), I32))), (bn, bm)),
                  kb.bcast(tn, (bn, bm)))
    kb.store(kb.ptrs(kb.a["out"], toffs), xt)

    def inputs(rng):
        return [rng.standard_normal((bm, bn)).astype(np.float32), np.zeros((bn, bm), np.float32)]
    return Case(f"transpose_{bm}x{bn}", kb.done(), (1, 1, 1), inputs, [1], lambda a: {1: a[0].T.copy()})


def all_cases() -> list[Case]:
    return [
        vector_add(), vector_add(block=128, n=1000), vector_add(dtype=F16, n=4096),
        softmax(), softmax(cols=4096, block=4096, num_warps=8), softmax(cols=100, block=128, num_warps=1),
        row_sum_2d(16, 64, 1), row_sum_2d(16, 64, 0), row_sum_2d(64, 32, 0), argmax(),
        cumsum(), cumsum((1024,), num_warps=4), cumsum((256,), reverse=True), cumsum((16, 64), 0),
        cumsum((16, 64), 1), cumsum((64, 16), 0, reverse=True, num_warps=2), cumsum((4096,), num_warps=8),
        transpose(), transpose(64, 16), dot(), dot(64, 32, 16, F16), dot(32, 64, 32, F32, "tf32"),
        loop_sum(), if_while(), casts(), math_ops(), int_ops(), join_split(), bf16_io(), device_print(),
        i64_offsets(), softmax_rows(), softmax_rows(1, 1024, 4, 8), pointer_loop(), if_tiles(),
        linear_recurrence(), linear_recurrence(4096, 8), narrow_reductions(), cache_hints(), casts_rtz(),
        cumsum((16,), num_warps=4), cumsum((8, 4), 1, num_warps=2), cumsum((4, 8), 0, reverse=True),
        row_sum_2d(4, 8, 0), argmax(16),
    ]



