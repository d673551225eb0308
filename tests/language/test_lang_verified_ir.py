"""Kernels built with many builtins pass the IR verifier, and their printed text parses
back: what the language layer emits is well-formed IR."""
from __future__ import annotations

from lang_helpers import make_sem

import tegula.language as tl
from tegula import ir
from tegula.ir.parser import parse_ir
from tegula.ir.printer import print_ir
from tegula.ir.verifier import verify


class FakeJit:
    _tegula_jit = True

    def __init__(self, fn):
        self.fn = fn


def _finish(kernel):
    kernel.body.instrs.append(ir.Instr(ir.Op.RETURN, [], []))
    verify(kernel)
    text = print_ir(kernel)
    assert print_ir(parse_ir(text)) == text
    return text


def test_elementwise_memory_kernel_verifies():
    args = {"x": ir.PointerType(ir.F16), "y": ir.PointerType(ir.F32), "b": ir.PointerType(ir.I1), "n": ir.I32}
    sem, k, v = make_sem(args, debug=True)
    pid = tl.program_id.impl(sem, 0)
    offs = pid * 128 + tl.arange.impl(sem, 0, 128)
    offs = tl.max_contiguous.impl(sem, tl.multiple_of.impl(sem, offs, 16), 16)
    mask = offs < v["n"]
    x = tl.load.impl(sem, v["x"] + offs, mask=mask, other=0.0)
    y = x.to(tl.float32) * 2 + 1
    y = tl.where.impl(sem, y > 0, y, -y) / 3
    y = tl.exp.impl(sem, y) + tl.sqrt.impl(sem, tl.abs.impl(sem, y))
    y = tl.maximum.impl(sem, y, 0.5) + tl.clamp.impl(sem, y, 0.0, 1.0)
    i = offs // 3 + offs % 5 - (offs >> 1) + (offs << 2) ^ (offs & 7) | 1
    y = y + i.to(tl.float32) + tl.fma.impl(sem, y, y, y)
    tl.store.impl(sem, v["y"] + offs, y, mask=mask)
    tl.store.impl(sem, v["b"] + offs, y > 1.0, mask=mask)
    tl.device_assert.impl(sem, offs >= 0, "negative offset")
    tl.device_print.impl(sem, "y", y)
    tl.assume.impl(sem, v["n"] > 0)
    tl.debug_barrier.impl(sem)
    p8 = v["y"].to(tl.pointer_type(tl.int8))
    tl.store.impl(sem, p8, 1)
    _finish(k)


def test_shape_reduce_dot_kernel_verifies():
    sem, k, v = make_sem({"a": ir.PointerType(ir.F16), "o": ir.PointerType(ir.F32)},
                         call_function=lambda fn, args: fn.fn(*args))
    rm, rk = tl.arange.impl(sem, 0, 32), tl.arange.impl(sem, 0, 16)
    a = tl.load.impl(sem, v["a"] + rm[:, None] * 16 + rk[None, :])          # (32, 16) fp16
    b = tl.trans.impl(sem, a)                                                # (16, 32)
    c = tl.dot.impl(sem, a, b)                                               # (32, 32) fp32
    c = tl.dot.impl(sem, a, b, c)
    s = tl.sum.impl(sem, c, 1)
    m, idx = tl.max.impl(sem, c, 0, return_indices=True)
    am = tl.argmin.impl(sem, c, None)
    cs = tl.cumsum.impl(sem, s, 0, reverse=True)
    combine = FakeJit(lambda a0, a1, b0, b1: (a0 + b0, tl.maximum.impl(sem, a1, b1)))
    red = tl.reduce.impl(sem, (s, cs), 0, combine)
    j = tl.join.impl(sem, m, m)
    lo, hi = tl.split.impl(sem, j)
    r = tl.reshape.impl(sem, tl.permute.impl(sem, tl.expand_dims.impl(sem, lo, 0), 1, 0), 32)
    total = red[0] + red[1] + am.to(tl.float32) + tl.xor_sum.impl(sem, idx, 0).to(tl.float32)
    one = tl.full.impl(sem, (1, 1), 2.0, tl.float32).item()
    out = r + hi + total + one + tl.broadcast_to.impl(sem, tl.sum.impl(sem, c, keep_dims=True), 1, 32)
    tl.store.impl(sem, v["o"] + rm, tl.reshape.impl(sem, out, 32))
    x, y = tl.split.impl(sem, tl.join.impl(sem, total, one))
    tl.store.impl(sem, v["o"], x + y)
    _finish(k)
