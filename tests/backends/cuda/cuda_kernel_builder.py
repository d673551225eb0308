"""The builder of the CUDA backend's hand-written test kernels: `KB` (a terse layer
over `ir.builder.Builder`), `Case` (a kernel with its inputs and numpy reference) and
common combine regions. Needs only numpy and tegula.ir."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.core import ArgAttrs, Block, Kernel, Loc, Value
from tegula.ir.ops import Op
from tegula.ir.types import (
    I32,
    PointerType,
    ScalarType,
    TileType,
    element_of,
    shape_of,
)

SRC = "/tmp/tegula_cuda_kernels.py"


class KB:
    """A terse kernel builder over `Builder` for tests."""

    def __init__(self, name: str, args: Sequence[tuple[str, Any, int]]):
        self.k = new_kernel(name, [t for _n, t, _d in args], [n for n, _t, _d in args], loc=Loc(SRC, 1, 0))
        self.k.arg_attrs = [ArgAttrs(d) for _n, _t, d in args]
        self.b = Builder(self.k.body)
        self.line = 2
        self.a = {n: v for (n, _t, _d), v in zip(args, self.k.args)}

    def step(self) -> None:
        self.b.loc = Loc(SRC, self.line, 4)
        self.line += 1

    def op(self, op: Op, *xs: Value, attrs: Any = None, type: Any = None) -> Value:
        self.step()
        return self.b.op1(op, *xs, attrs=attrs, type=type)

    def const(self, v: Any, t: Any) -> Value:
        self.step()
        return self.b.constant(v, t)

    def pid(self, axis: int = 0) -> Value:
        return self.op(Op.PROGRAM_ID, attrs=A.AxisAttrs(axis))

    def arange(self, n: int, start: int = 0) -> Value:
        return self.op(Op.ARANGE, attrs=A.RangeAttrs(start, start + n))

    def splat(self, v: Value, shape: Sequence[int]) -> Value:
        self.step()
        return self.b.splat(v, tuple(shape))

    def expand(self, v: Value, axis: int) -> Value:
        return self.op(Op.EXPAND_DIMS, v, attrs=A.ExpandDimsAttrs(axis))

    def bcast(self, v: Value, shape: Sequence[int]) -> Value:
        return self.op(Op.BROADCAST, v, attrs=A.ShapeAttrs(tuple(shape)))

    def ptrs(self, base: Value, offs: Value) -> Value:
        return self.op(Op.ADDPTR, self.splat(base, shape_of(offs.type)), offs)

    def load(self, ptrs: Value, mask: Optional[Value] = None, other: Optional[Value] = None, **kw) -> Value:
        ops = [ptrs] + ([mask] if mask is not None else []) + ([other] if other is not None else [])
        self.step()
        return self.b.op1(Op.LOAD, *ops, attrs=A.LoadAttrs(mask is not None, other is not None, **kw))

    def store(self, ptrs: Value, val: Value, mask: Optional[Value] = None) -> None:
        self.step()
        ops = [ptrs, val] + ([mask] if mask is not None else [])
        self.b.create(Op.STORE, ops, attrs=A.StoreAttrs(mask is not None))

    def cast(self, v: Value, t: ScalarType, rounding: str = "rtne") -> Value:
        self.step()
        return self.b.cast(v, t, rounding)

    def region(self, types: Sequence[Any], fn: Callable[[Builder, list[Value]], list[Value]]) -> Block:
        blk = Block()
        args = [blk.add_arg(t) for t in types]
        rb = Builder(blk)
        rb.loc = self.b.loc
        rb.yield_(fn(rb, args))
        return blk

    def reduce(self, xs: list[Value], axis: int, fn, elems: Optional[list] = None) -> list[Value]:
        elems = elems or [element_of(x.type) for x in xs]
        self.step()
        return self.b.create(Op.REDUCE, xs, attrs=A.ReduceAttrs(axis),
                             regions=[self.region(elems * 2, fn)]).results

    def scan(self, xs: list[Value], axis: int, fn, reverse: bool = False) -> list[Value]:
        elems = [element_of(x.type) for x in xs]
        self.step()
        return self.b.create(Op.SCAN, xs, attrs=A.ScanAttrs(axis, reverse),
                             regions=[self.region(elems * 2, fn)]).results

    def done(self) -> Kernel:
        self.step()
        self.b.create(Op.RETURN, [])
        return self.k


def add_fn(b: Builder, a: list[Value]) -> list[Value]:
    return [b.op1(Op.ADD, a[0], a[1])]


def max_fn(b: Builder, a: list[Value]) -> list[Value]:
    return [b.op1(Op.MAXIMUM, a[0], a[1], attrs=A.NanAttrs(True))]


@dataclass
class Case:
    name: str
    kernel: Kernel
    grid: tuple[int, int, int]
    inputs: Callable[[np.random.Generator], list]
    outputs: list[int]
    reference: Callable[[list], dict[int, np.ndarray]]
    num_warps: int = 4
    rtol: float = 1e-5
    atol: float = 1e-6
    extra: dict = field(default_factory=dict)


P = PointerType


# ---------------------------------------------------------------------- kernels


def tile_offsets(kb: KB, m: int, n: int, stride: int) -> Value:
    rm = kb.expand(kb.arange(m), 1)
    rn = kb.expand(kb.arange(n), 0)
    return kb.op(Op.ADD, kb.bcast(kb.op(Op.MUL, rm, kb.const(stride, TileType((m, 1), I32))), (m, n)),
                 kb.bcast(rn, (m, n)))
