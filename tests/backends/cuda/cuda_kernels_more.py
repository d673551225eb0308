"""Hand-built kernels for the CUDA backend tests, part 2: dot, control flow,
conversions, math, integer semantics, debug ops and memory hints."""
from __future__ import annotations

import numpy as np
from cuda_kernel_builder import KB, Case, P, add_fn, max_fn, tile_offsets

from tegula.ir import attrs as A
from tegula.ir.builder import Builder
from tegula.ir.core import Block, Value
from tegula.ir.ops import Op
from tegula.ir.types import BF16, F8E4M3, F8E5M2, F16, F32, I1, I32, I64, TileType


def dot(m: int = 32, n: int = 32, k: int = 32, dtype=F32, precision: str = "ieee",
        num_warps: int = 4) -> Case:
    kb = KB("dot_kernel", [("a", P(dtype), 16), ("b", P(dtype), 16), ("c", P(F32), 16)])
    a = kb.load(kb.ptrs(kb.a["a"], tile_offsets(kb, m, k, k)))
    b = kb.load(kb.ptrs(kb.a["b"], tile_offsets(kb, k, n, n)))
    acc = kb.const(0.0, TileType((m, n), F32))
    kb.step()
    c = kb.b.create(Op.DOT, [a, b, acc], attrs=A.DotAttrs(precision)).result
    kb.store(kb.ptrs(kb.a["c"], tile_offsets(kb, m, n, n)), c)
    np_t = {F32: np.float32, F16: np.float16}[dtype]

    def inputs(rng):
        return [rng.standard_normal((m, k)).astype(np_t), rng.standard_normal((k, n)).astype(np_t),
                np.zeros((m, n), np.float32)]

    def ref(a):
        x, y = a[0].astype(np.float64), a[1].astype(np.float64)
        if precision == "tf32":
            x, y = _tf32(a[0]).astype(np.float64), _tf32(a[1]).astype(np.float64)
        return {2: (x @ y).astype(np.float32)}
    return Case(f"dot_{m}x{n}x{k}_{dtype}_{precision}", kb.done(), (1, 1, 1), inputs, [2], ref,
                num_warps=num_warps, rtol=1e-4, atol=1e-4)


def _tf32(x: np.ndarray) -> np.ndarray:
    """Round f32 to tf32 (10 mantissa bits), ties away from zero as cvt.rna does."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32)


def loop_sum(block: int = 256, n: int = 3000) -> Case:
    """for i in range(0, n, BLOCK): acc += x[i + arange] (masked); out = sum(acc)."""
    kb = KB("loop_sum", [("x", P(F32), 16), ("out", P(F32), 16), ("n", I32, 1)])
    zero = kb.const(0, I32)
    step = kb.const(block, I32)
    acc0 = kb.const(0.0, TileType((block,), F32))
    body = Block()
    iv = body.add_arg(I32)
    acc = body.add_arg(TileType((block,), F32))
    kb.step()
    fins = kb.b.create(Op.FOR, [zero, kb.a["n"], step, acc0], regions=[body])
    with kb.b.at_end_of(body):
        offs = kb.op(Op.ADD, kb.splat(iv, (block,)), kb.arange(block))
        mask = kb.op(Op.LT, offs, kb.splat(kb.a["n"], (block,)))
        x = kb.load(kb.ptrs(kb.a["x"], offs), mask, kb.const(0.0, TileType((block,), F32)))
        kb.b.yield_([kb.op(Op.ADD, acc, x)])
    (total,) = kb.reduce([fins.results[0]], 0, add_fn)
    kb.store(kb.a["out"], total)

    def inputs(rng):
        return [rng.standard_normal(n).astype(np.float32), np.zeros(1, np.float32), n]
    def ref(a):
        return {1: np.array([a[0][:a[2]].astype(np.float64).sum()], np.float32)}
    return Case("for_loop_sum", kb.done(), (1, 1, 1), inputs, [1], ref, rtol=1e-4, atol=1e-4)


def if_while(block: int = 128) -> Case:
    """out[pid] = collatz steps of (pid + 7), then negated if pid is odd (scalar control flow)."""
    kb = KB("if_while", [("out", P(I32), 16)])
    pid = kb.pid()
    start = kb.op(Op.ADD, pid, kb.const(7, I32))
    before, after = Block(), Block()
    bx, bc = before.add_arg(I32), before.add_arg(I32)
    ax, ac = after.add_arg(I32), after.add_arg(I32)
    kb.step()
    w = kb.b.create(Op.WHILE, [start, kb.const(0, I32)], regions=[before, after],
                    result_types=[I32, I32])
    with kb.b.at_end_of(before):
        cond = kb.op(Op.NE, bx, kb.const(1, I32))
        kb.step()
        kb.b.create(Op.CONDITION, [cond, bx, bc])
    with kb.b.at_end_of(after):
        odd = kb.op(Op.EQ, kb.op(Op.AND, ax, kb.const(1, I32)), kb.const(1, I32))
        then_b, else_b = Block(), Block()
        kb.step()
        ifo = kb.b.create(Op.IF, [odd], regions=[then_b, else_b], result_types=[I32])
        with kb.b.at_end_of(then_b):
            kb.b.yield_([kb.op(Op.ADD, kb.op(Op.MUL, ax, kb.const(3, I32)), kb.const(1, I32))])
        with kb.b.at_end_of(else_b):
            kb.b.yield_([kb.op(Op.IDIV, ax, kb.const(2, I32))])
        kb.b.yield_([ifo.result, kb.op(Op.ADD, ac, kb.const(1, I32))])
    steps = w.results[1]
    podd = kb.op(Op.EQ, kb.op(Op.AND, pid, kb.const(1, I32)), kb.const(1, I32))
    t2, e2 = Block(), Block()
    kb.step()
    sel = kb.b.create(Op.IF, [podd], regions=[t2, e2], result_types=[I32])
    with kb.b.at_end_of(t2):
        kb.b.yield_([kb.op(Op.NEG, steps)])
    with kb.b.at_end_of(e2):
        kb.b.yield_([steps])
    kb.store(kb.op(Op.ADDPTR, kb.a["out"], pid), sel.result)

    def collatz(v):
        c = 0
        while v != 1:
            v = 3 * v + 1 if v & 1 else v // 2
            c += 1
        return c

    def ref(a):
        return {0: np.array([(-1 if p & 1 else 1) * collatz(p + 7) for p in range(block)], np.int32)}
    return Case("if_while", kb.done(), (block, 1, 1), lambda rng: [np.zeros(block, np.int32)], [0], ref)


def casts(n: int = 1024) -> Case:
    """f32 → {f16, bf16, e4m3, e5m2} → f32, and f32 → i32 (saturating) → f32."""
    kb = KB("casts", [("x", P(F32), 16), ("out", P(F32), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    for j, t in enumerate((F16, BF16, F8E4M3, F8E5M2, I32)):
        y = kb.cast(kb.cast(x, t), F32)
        off = kb.op(Op.ADD, idx, kb.splat(kb.const(j * n, I32), (n,)))
        kb.store(kb.ptrs(kb.a["out"], off), y)

    def inputs(rng):
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))).astype(np.float32)
        x[:8] = [0.0, -0.0, np.inf, -np.inf, 1e-30, 3e9, -3e9, 448.0]
        return [x, np.zeros(5 * n, np.float32)]

    def ref(a):
        from tegula.ir.numpy_ops import cast_value
        x = a[0]
        outs = []
        for t in (F16, BF16, F8E4M3, F8E5M2, I32):
            with np.errstate(over="ignore", invalid="ignore"):
                y = np.asarray(cast_value(cast_value(x, F32, t), t, F32), np.float32)
            if t == F8E5M2:
                # PTX converts to e5m2 only with .satfinite: overflow gives ±57344, not ±inf
                # (the interpreter rounds to inf; see the backend's notes)
                y = np.where(np.isinf(y), np.sign(y) * 57344.0, y).astype(np.float32)
            outs.append(y)
        return {1: np.concatenate(outs)}
    return Case("casts", kb.done(), (1, 1, 1), inputs, [1], ref, rtol=0, atol=0,
                extra={"reference_only": True})


def math_ops(n: int = 512) -> Case:
    kb = KB("math", [("x", P(F32), 16), ("out", P(F32), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    ax = kb.op(Op.ABS, x)
    ops = [(Op.EXP, x), (Op.LOG, ax), (Op.SIN, x), (Op.COS, x), (Op.SQRT, ax), (Op.SQRT_RN, ax),
           (Op.RSQRT, ax), (Op.ERF, x), (Op.EXP2, x), (Op.LOG2, ax), (Op.FLOOR, x), (Op.CEIL, x)]
    for j, (op, v) in enumerate(ops):
        off = kb.op(Op.ADD, idx, kb.splat(kb.const(j * n, I32), (n,)))
        kb.store(kb.ptrs(kb.a["out"], off), kb.op(op, v))

    def inputs(rng):
        return [(rng.standard_normal(n) * 3).astype(np.float32), np.zeros(len(ops) * n, np.float32)]

    def ref(a):
        import math
        x = a[0].astype(np.float64)
        ax = np.abs(x)
        erf = np.vectorize(math.erf)
        r = [np.exp(x), np.log(ax), np.sin(x), np.cos(x), np.sqrt(ax), np.sqrt(ax), 1 / np.sqrt(ax), erf(x),
             np.exp2(x), np.log2(ax), np.floor(x), np.ceil(x)]
        return {1: np.concatenate(r).astype(np.float32)}
    return Case("math", kb.done(), (1, 1, 1), inputs, [1], ref, rtol=2e-6, atol=1e-6)


def int_ops(n: int = 256) -> Case:
    """C-style // and %, shifts by >= the width, umulhi, min/max, on i32."""
    kb = KB("intops", [("x", P(I32), 16), ("y", P(I32), 16), ("out", P(I32), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    y = kb.load(kb.ptrs(kb.a["y"], idx))
    sh = kb.op(Op.AND, y, kb.const(63, TileType((n,), I32)))
    ops = [(Op.IDIV, x, y), (Op.REM, x, y), (Op.SHL, x, sh), (Op.SHR, x, sh), (Op.UMULHI, x, y),
           (Op.MAXIMUM, x, y), (Op.MINIMUM, x, y), (Op.XOR, x, y)]
    for j, (op, a, b) in enumerate(ops):
        off = kb.op(Op.ADD, idx, kb.splat(kb.const(j * n, I32), (n,)))
        attrs = A.NanAttrs() if op in (Op.MAXIMUM, Op.MINIMUM) else None
        kb.store(kb.ptrs(kb.a["out"], off), kb.op(op, a, b, attrs=attrs))

    def inputs(rng):
        x = rng.integers(-2**31, 2**31 - 1, n).astype(np.int32)
        y = rng.integers(-50, 50, n).astype(np.int32)
        y[:4] = [0, -1, 0, -1]
        x[:4] = [5, -2**31, -7, 9]
        return [x, y, np.zeros(len(ops) * n, np.int32)]

    def ref(a):
        from tegula.ir import numpy_ops as npo
        x, y = a[0], a[1]
        sh = y & 63
        r = [npo.c_div(x, y), npo.c_rem(x, y), npo.shift_left(x, sh), npo.shift_right(x, sh),
             npo.umulhi(x, y), np.maximum(x, y), np.minimum(x, y), x ^ y]
        return {2: np.concatenate([np.asarray(v, np.int32) for v in r])}
    return Case("int_ops", kb.done(), (1, 1, 1), inputs, [2], ref, rtol=0, atol=0)


def join_split(n: int = 128) -> Case:
    """out = interleave(x, y) via join+reshape, and x2/y2 = split(join(x, y)) swapped."""
    kb = KB("join_split", [("x", P(F32), 16), ("y", P(F32), 16), ("out", P(F32), 16), ("out2", P(F32), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    y = kb.load(kb.ptrs(kb.a["y"], idx))
    j = kb.op(Op.JOIN, x, y)
    flat = kb.op(Op.RESHAPE, j, attrs=A.ShapeAttrs((2 * n,)))
    kb.store(kb.ptrs(kb.a["out"], kb.arange(2 * n)), flat)
    kb.step()
    a, b = kb.b.create(Op.SPLIT, [j]).results
    kb.store(kb.ptrs(kb.a["out2"], idx), kb.op(Op.SUB, b, a))

    def inputs(rng):
        return [rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32),
                np.zeros(2 * n, np.float32), np.zeros(n, np.float32)]
    return Case("join_split", kb.done(), (1, 1, 1), inputs, [2, 3],
                lambda a: {2: np.stack([a[0], a[1]], 1).reshape(-1), 3: a[1] - a[0]})


def bf16_io(n: int = 2048) -> Case:
    """bf16 in, bf16 out (x * 2 + 1 computed in bf16), u16 bit patterns on the host."""
    kb = KB("bf16_io", [("x", P(BF16), 16), ("out", P(BF16), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    two, one = kb.const(2.0, TileType((n,), BF16)), kb.const(1.0, TileType((n,), BF16))
    y = kb.op(Op.ADD, kb.op(Op.MUL, x, two), one)
    kb.store(kb.ptrs(kb.a["out"], idx), y)

    def inputs(rng):
        from tegula.ir.numpy_ops import f32_to_bf16_bits
        return [f32_to_bf16_bits(rng.standard_normal(n).astype(np.float32)), np.zeros(n, np.uint16)]

    def ref(a):
        from tegula.ir.numpy_ops import bf16_bits_to_f32, f32_to_bf16_bits
        x = bf16_bits_to_f32(a[0])
        t = bf16_bits_to_f32(f32_to_bf16_bits(x * 2))
        return {1: f32_to_bf16_bits(t + 1)}
    return Case("bf16_io", kb.done(), (1, 1, 1), inputs, [1], ref, rtol=0, atol=0)


def device_print(n: int = 8) -> Case:
    kb = KB("printer", [("x", P(I32), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    kb.step()
    kb.b.create(Op.DEVICE_PRINT, [x], attrs=A.PrintAttrs(" x: "))  # the prefix as tl.device_print makes it
    return Case("device_print", kb.done(), (1, 1, 1), lambda rng: [np.arange(n, dtype=np.int32)], [],
                lambda a: {})


def i64_offsets(n: int = 256) -> Case:
    """Offsets computed in i64 (pid * stride with a large stride) — the GEP path for i64."""
    kb = KB("i64_offsets", [("x", P(F32), 16), ("out", P(F32), 16), ("stride", I64, 16)])
    base = kb.op(Op.MUL, kb.cast(kb.pid(), I64), kb.a["stride"])
    offs = kb.op(Op.ADD, kb.splat(base, (n,)), kb.cast(kb.arange(n), I64))
    kb.store(kb.ptrs(kb.a["out"], offs), kb.op(Op.MUL, kb.load(kb.ptrs(kb.a["x"], offs)),
                                                kb.const(3.0, TileType((n,), F32))))

    def inputs(rng):
        return [rng.standard_normal(2 * n).astype(np.float32), np.zeros(2 * n, np.float32), n]
    return Case("i64_offsets", kb.done(), (2, 1, 1), inputs, [1], lambda a: {1: a[0] * 3})


def out_of_bounds(n: int = 100) -> Case:
    """Reads 128 elements of a 100-element array without a mask (checked mode catches it)."""
    kb = KB("oob", [("x", P(F32), 16), ("out", P(F32), 16)])
    idx = kb.arange(128)
    kb.store(kb.ptrs(kb.a["out"], idx), kb.load(kb.ptrs(kb.a["x"], idx)))
    return Case("oob", kb.done(), (1, 1, 1),
                lambda rng: [np.zeros(n, np.float32), np.zeros(128, np.float32)], [1], lambda a: {},
                extra={"expect_oob": True})


def softmax_rows(rows: int = 4, cols: int = 256, n_rows: int = 16, num_warps: int = 4) -> Case:
    """Several rows per program: reduce along axis 1, keep the dims, broadcast back."""
    kb = KB("softmax_rows", [("x", P(F32), 16), ("out", P(F32), 16)])
    r0 = kb.op(Op.MUL, kb.pid(), kb.const(rows, I32))
    offs = kb.op(Op.ADD, tile_offsets(kb, rows, cols, cols),
                 kb.splat(kb.op(Op.MUL, r0, kb.const(cols, I32)), (rows, cols)))
    x = kb.load(kb.ptrs(kb.a["x"], offs))
    (m,) = kb.reduce([x], 1, max_fn)
    mb = kb.bcast(kb.expand(m, 1), (rows, cols))
    e = kb.op(Op.EXP, kb.op(Op.SUB, x, mb))
    (s,) = kb.reduce([e], 1, add_fn)
    sb = kb.bcast(kb.expand(s, 1), (rows, cols))
    kb.store(kb.ptrs(kb.a["out"], offs), kb.op(Op.DIV, e, sb))

    def inputs(rng):
        return [rng.standard_normal((n_rows, cols)).astype(np.float32), np.zeros((n_rows, cols), np.float32)]

    def ref(a):
        x = a[0].astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        return {1: (e / e.sum(1, keepdims=True)).astype(np.float32)}
    return Case(f"softmax_rows_{rows}x{cols}", kb.done(), (n_rows // rows, 1, 1), inputs, [1], ref,
                num_warps=num_warps, rtol=1e-5, atol=1e-7)


def pointer_loop(block: int = 128, steps: int = 5) -> Case:
    """A tile of pointers carried by a loop and advanced each iteration."""
    kb = KB("pointer_loop", [("x", P(F32), 16), ("out", P(F32), 16)])
    p0 = kb.ptrs(kb.a["x"], kb.arange(block))
    acc0 = kb.const(0.0, TileType((block,), F32))
    body = Block()
    body.add_arg(I32)
    p = body.add_arg(p0.type)
    acc = body.add_arg(acc0.type)
    kb.step()
    loop = kb.b.create(Op.FOR, [kb.const(0, I32), kb.const(steps, I32), kb.const(1, I32), p0, acc0],
                       regions=[body])
    with kb.b.at_end_of(body):
        x = kb.load(p)
        nxt = kb.op(Op.ADDPTR, p, kb.splat(kb.const(block, I32), (block,)))
        kb.b.yield_([nxt, kb.op(Op.ADD, acc, x)])
    kb.store(kb.ptrs(kb.a["out"], kb.arange(block)), loop.results[1])

    def inputs(rng):
        return [rng.standard_normal(block * steps).astype(np.float32), np.zeros(block, np.float32)]
    return Case("pointer_loop", kb.done(), (1, 1, 1), inputs, [1],
                lambda a: {1: a[0].reshape(steps, block).sum(0)}, rtol=1e-5, atol=1e-5)


def if_tiles(m: int = 32, n: int = 32) -> Case:
    """An `if` whose branches yield a tile in different layouts (one transposed)."""
    kb = KB("if_tiles", [("x", P(F32), 16), ("out", P(F32), 16)])
    offs = tile_offsets(kb, m, n, n)
    x = kb.load(kb.ptrs(kb.a["x"], offs))
    pid = kb.pid()
    even = kb.op(Op.EQ, kb.op(Op.AND, pid, kb.const(1, I32)), kb.const(0, I32))
    then_b, else_b = Block(), Block()
    kb.step()
    branch = kb.b.create(Op.IF, [even], regions=[then_b, else_b], result_types=[x.type])
    with kb.b.at_end_of(then_b):
        kb.b.yield_([kb.op(Op.MUL, x, kb.const(2.0, TileType((m, n), F32)))])
    with kb.b.at_end_of(else_b):
        kb.b.yield_([kb.op(Op.PERMUTE, x, attrs=A.PermuteAttrs((1, 0)))])
    base = kb.op(Op.MUL, pid, kb.const(m * n, I32))
    kb.store(kb.ptrs(kb.a["out"], kb.op(Op.ADD, offs, kb.splat(base, (m, n)))), branch.result)

    def inputs(rng):
        return [rng.standard_normal((m, n)).astype(np.float32), np.zeros((2, m, n), np.float32)]
    return Case("if_tiles", kb.done(), (2, 1, 1), inputs, [1],
                lambda a: {1: np.stack([a[0] * 2, a[0].T])})


def linear_recurrence(n: int = 512, num_warps: int = 4) -> Case:
    """h[i] = a[i] * h[i-1] + b[i] as a scan of (a, b) pairs: associative, not commutative."""
    kb = KB("recurrence", [("a", P(F32), 16), ("b", P(F32), 16), ("h", P(F32), 16)])
    idx = kb.arange(n)
    a = kb.load(kb.ptrs(kb.a["a"], idx))
    b = kb.load(kb.ptrs(kb.a["b"], idx))

    def fn(rb: Builder, v: list[Value]) -> list[Value]:
        a1, b1, a2, b2 = v
        return [rb.op1(Op.MUL, a1, a2), rb.op1(Op.ADD, rb.op1(Op.MUL, b1, a2), b2)]
    _a, h = kb.scan([a, b], 0, fn)
    kb.store(kb.ptrs(kb.a["h"], idx), h)

    def inputs(rng):
        return [rng.uniform(0.5, 1.0, n).astype(np.float32), rng.standard_normal(n).astype(np.float32),
                np.zeros(n, np.float32)]

    def ref(args):
        a, b = args[0].astype(np.float64), args[1].astype(np.float64)
        h, out = 0.0, []
        for ai, bi in zip(a, b):
            h = ai * h + bi
            out.append(h)
        return {2: np.array(out, np.float32)}
    return Case(f"recurrence_scan_w{num_warps}", kb.done(), (1, 1, 1), inputs, [2], ref, num_warps=num_warps,
                rtol=1e-4, atol=1e-4)


def narrow_reductions(n: int = 256) -> Case:
    """Reductions on 16-bit floats, 64-bit ints and booleans (the shuffle widths)."""
    kb = KB("narrow_reduce", [("x", P(F16), 16), ("y", P(I64), 16), ("z", P(I1), 16), ("out", P(F32), 16),
                              ("out64", P(I64), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    y = kb.load(kb.ptrs(kb.a["y"], idx))
    z = kb.load(kb.ptrs(kb.a["z"], idx))
    (mx,) = kb.reduce([x], 0, max_fn)
    (sy,) = kb.reduce([y], 0, add_fn)

    def any_fn(rb: Builder, v: list[Value]) -> list[Value]:
        return [rb.op1(Op.OR, v[0], v[1])]
    (anyz,) = kb.reduce([z], 0, any_fn)
    kb.store(kb.a["out"], kb.cast(mx, F32))
    kb.store(kb.op(Op.ADDPTR, kb.a["out"], kb.const(1, I32)), kb.cast(anyz, F32))
    kb.store(kb.a["out64"], sy)

    def inputs(rng):
        z = np.zeros(n, np.bool_)
        z[77] = True
        return [rng.standard_normal(n).astype(np.float16), rng.integers(-2**40, 2**40, n).astype(np.int64), z,
                np.zeros(2, np.float32), np.zeros(1, np.int64)]
    return Case("narrow_reductions", kb.done(), (1, 1, 1), inputs, [3, 4],
                lambda a: {3: np.array([a[0].max(), 1.0], np.float32), 4: np.array([a[1].sum()], np.int64)},
                rtol=0, atol=0)


def cache_hints(n: int = 256) -> Case:
    """Loads and stores with every cache modifier / eviction policy, and volatile."""
    kb = KB("cache_hints", [("x", P(F32), 16), ("out", P(F32), 16)])
    idx = kb.arange(n)
    mask = kb.op(Op.LT, idx, kb.splat(kb.const(n - 3, I32), (n,)))
    zero = kb.const(0.0, TileType((n,), F32))
    total = None
    loads = [dict(cache_modifier=".ca"), dict(cache_modifier=".cg", eviction_policy="evict_last"),
             dict(cache_modifier=".cv"), dict(eviction_policy="evict_first"), dict(volatile=True)]
    for kw in loads:
        x = kb.load(kb.ptrs(kb.a["x"], idx), mask, zero, **kw)
        total = x if total is None else kb.op(Op.ADD, total, x)
    for j, mod in enumerate((".wb", ".cg", ".cs", ".wt")):
        off = kb.op(Op.ADD, idx, kb.splat(kb.const(j * n, I32), (n,)))
        kb.step()
        kb.b.create(Op.STORE, [kb.ptrs(kb.a["out"], off), total, mask],
                    attrs=A.StoreAttrs(True, mod, "evict_first" if j == 0 else ""))

    def inputs(rng):
        return [rng.standard_normal(n).astype(np.float32), np.zeros(4 * n, np.float32)]

    def ref(a):
        y = np.where(np.arange(n) < n - 3, a[0] * 5, 0).astype(np.float32)
        return {1: np.tile(y, 4)}
    return Case("cache_hints", kb.done(), (1, 1, 1), inputs, [1], ref, rtol=1e-6, atol=1e-6)


def casts_rtz(n: int = 512) -> Case:
    """f32 → f16 / bf16 rounding toward zero."""
    kb = KB("casts_rtz", [("x", P(F32), 16), ("out", P(F32), 16)])
    idx = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    for j, t in enumerate((F16, BF16)):
        y = kb.cast(kb.cast(x, t, "rtz"), F32)
        kb.store(kb.ptrs(kb.a["out"], kb.op(Op.ADD, idx, kb.splat(kb.const(j * n, I32), (n,)))), y)

    def inputs(rng):
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-10, 10, n))).astype(np.float32)
        x[:4] = [1e6, -1e6, 65520.0, -0.0]
        return [x, np.zeros(2 * n, np.float32)]

    def ref(a):
        x = a[0].astype(np.float64)
        out = []
        for mbits, emax in ((10, 15), (7, 127)):
            mag = np.abs(x)
            e = np.floor(np.log2(np.where(mag > 0, mag, 1)))
            e = np.maximum(e, 1 - emax - 0)  # subnormals share the smallest exponent
            ulp = np.exp2(e - mbits)
            y = np.trunc(mag / ulp) * ulp
            top = (2 - 2.0 ** -mbits) * 2.0 ** emax
            out.append((np.sign(x) * np.minimum(y, top)).astype(np.float32))
        return {1: np.concatenate(out)}
    return Case("casts_rtz", kb.done(), (1, 1, 1), inputs, [1], ref, rtol=0, atol=0)
