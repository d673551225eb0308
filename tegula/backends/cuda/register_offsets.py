"""Integer register values kept as *a shared part plus a constant*, so that index
arithmetic leaves each register's constant for last and LLVM folds it into an address
immediate.

A register of an `arange` (or of any index built from one) is the thread's part of the
index plus a constant of the register: `tid_part + c_r`. Lowered as one LLVM value per
register, those values are computed once and shared by every user; an index such as
`(k * BLOCK_K + offs_k[:, None]) * stride + offs_n[None, :]` then adds each shared
register value to the loop's part, and LLVM cannot reassociate through a value with
several users, so each of a thread's rows keeps its own 64-bit address register (Inductor's
matmul template: 216 registers and an IMAD.WIDE per row where Triton has 168 and one base
plus immediates; 0.89× Triton's time on an H200 at 4096³, 128x128x64, 3 stages).

`RegisterOffsets` remembers, for LLVM values it made, `value == base + c` (wrapping
arithmetic, `c` a Python int). An add or subtract with such an operand is emitted as
`(other ± base) ± c` and a product with a constant as `base * k + c * k`, each result
remembered in turn, so the constant stays outermost through the index expression: the
shared part is one value for all of a thread's registers, and only the last add differs.
Every rewrite is an identity of modular arithmetic, so each value is bit-for-bit what
the plain lowering computes.
"""
from __future__ import annotations

from typing import Optional

import llvmlite.ir as ir

from ...config import knobs
from ...ir.ops import Op

# the integer ops `RegisterOffsets.lower` reassociates (every other op lowers plainly)
REASSOCIATED_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL})


class RegisterOffsets:
    """The `value == base + constant` facts of the lowering's integer registers."""

    def __init__(self) -> None:
        self._split: dict[int, tuple[ir.Value, ir.Value, int]] = {}  # id(value) -> (value, base, c)
        self.enabled = bool(knobs.register_offsets)  # read once per kernel lowered

    def remember(self, value: ir.Value, base: ir.Value, c: int) -> None:
        self._split[id(value)] = (value, base, c)

    def split(self, value: ir.Value) -> Optional[tuple[ir.Value, int]]:
        entry = self._split.get(id(value))
        if entry is None or entry[0] is not value:
            return None
        return entry[1], entry[2]

    def offset(self, b: ir.IRBuilder, base: ir.Value, c: int) -> ir.Value:
        """`base + c`, remembered as such (the base itself when c wraps to 0)."""
        width = base.type.width
        c &= (1 << width) - 1
        if c == 0:
            return base
        value = b.add(base, ir.Constant(base.type, c))
        if self.enabled:
            self.remember(value, base, c)
        return value

    def shifted(self, b: ir.IRBuilder, value: ir.Value, k: int) -> ir.Value:
        """`value + k` for a constant `k`, with the constant folded into value's own."""
        split = self.split(value)
        if split is None:
            return self.offset(b, value, k)
        base, c = split
        return self.offset(b, base, c + k)

    def lower(self, b: ir.IRBuilder, op: Op, args: list[ir.Value]) -> Optional[ir.Value]:
        """The reassociated lowering of integer `op` over `args`, or None where no
        operand is a remembered `base + c` (or the op is not add, subtract or a product
        with a constant)."""
        if op not in REASSOCIATED_OPS or len(args) != 2:
            return None
        if not all(isinstance(a.type, ir.IntType) and a.type.width > 1 for a in args):
            return None
        x, y = args
        sx, sy = self.split(x), self.split(y)
        if sx is None and sy is None:
            return None
        if op is Op.ADD or op is Op.SUB:
            bx, cx = sx if sx is not None else (x, 0)
            by, cy = sy if sy is not None else (y, 0)
            if op is Op.ADD:
                return self.offset(b, b.add(bx, by), cx + cy)
            return self.offset(b, b.sub(bx, by), cx - cy)
        if op is Op.MUL:
            if sx is not None and isinstance(y, ir.Constant) and isinstance(y.constant, int):
                return self.offset(b, b.mul(sx[0], y), sx[1] * y.constant)
            if sy is not None and isinstance(x, ir.Constant) and isinstance(x.constant, int):
                return self.offset(b, b.mul(x, sy[0]), sy[1] * x.constant)
        return None
