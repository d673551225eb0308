"""Host models of the warp-collective tensor-core instructions, `ldmatrix` and
`mma.sync`, each computed from the instruction's definition in the PTX ISA rather than
from the lowering's fragment bookkeeping, so running a dot on the emulator checks that
bookkeeping against an independent statement of the instruction.

Both are warp collectives over the exchange buffer (`HostDevice.collective(b, "warp",
...)`): each thread publishes its row address (`ldmatrix`) or its operand registers
(`mma`), and takes the elements the definition assigns to it from the other lanes' slots.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir

from ...llvm import casts
from ...llvm.intrinsics import intrinsic
from ...llvm.types import F16, F32, I16, I32, I64

if TYPE_CHECKING:
    from .host_device import HostDevice


def _c(n: int) -> ir.Constant:
    return ir.Constant(I32, n)


def _clamp(b: ir.IRBuilder, v: ir.Value, lo: int, hi: int) -> ir.Value:
    """`v` (an i64) clamped to [lo, hi]."""
    v = b.select(b.icmp_signed("<", v, ir.Constant(I64, lo)), ir.Constant(I64, lo), v)
    return b.select(b.icmp_signed(">", v, ir.Constant(I64, hi)), ir.Constant(I64, hi), v)


class WarpModels:
    def ldmatrix(self: "HostDevice", b: ir.IRBuilder, byte_offset: ir.Value, count: int,
                 trans: bool) -> list[ir.Value]:
        """`ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16`: lanes publish their
        row addresses; thread t takes from matrix i row t // 4, 16-bit columns
        2(t % 4) and 2(t % 4) + 1 (with `trans`, rows 2(t % 4), 2(t % 4) + 1 of column
        t // 4)."""
        hi, lo = b.lshr(self.lane, _c(2)), b.and_(self.lane, _c(3))

        def row_address(row: ir.Value) -> ir.Value:
            return self.peek(b, b.add(self.warp_base, row))

        def load(off: ir.Value, ty: ir.Type) -> ir.Value:
            return b.load(self.shared_ptr(b, off, ty.width // 8), typ=ty)

        def read() -> list[ir.Value]:
            out = []
            for i in range(count):
                first = _c(8 * i)
                if not trans:
                    addr = row_address(b.add(first, hi))
                    out.append(load(b.add(addr, b.shl(lo, _c(2))), I32))
                    continue
                col = b.shl(hi, _c(1))  # byte offset of 16-bit column t // 4
                r0 = b.add(first, b.shl(lo, _c(1)))
                x0 = load(b.add(row_address(r0), col), I16)
                x1 = load(b.add(row_address(b.add(r0, _c(1))), col), I16)
                out.append(b.or_(b.zext(x0, I32), b.shl(b.zext(x1, I32), _c(16))))
            return out

        return self.collective(b, "warp", [byte_offset], read)

    def stmatrix(self: "HostDevice", b: ir.IRBuilder, byte_offset: ir.Value, words: list[ir.Value],
                 trans: bool = False) -> None:
        """`stmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16`: lanes publish their
        row address and their register of each matrix; lane 8i + r writes row r of
        matrix i, 16 bytes: the registers i of threads 4r .. 4r + 3, in that order (with
        `trans`, element c of the row is the 16-bit half r % 2 of thread 4c + r // 2's
        register i: the mirror of ldmatrix.trans)."""
        count = len(words)
        row, matrix = b.and_(self.lane, _c(7)), b.lshr(self.lane, _c(3))

        def write() -> list[ir.Value]:
            own = self.peek(b, b.add(self.warp_base, self.lane))
            for i in range(count):
                with b.if_then(b.icmp_unsigned("==", matrix, _c(i))):
                    if not trans:
                        for q in range(4):
                            w = self.peek(b, b.add(self.warp_base, b.add(b.shl(row, _c(2)), _c(q))), 1 + i)
                            b.store(w, self.shared_ptr(b, b.add(own, _c(4 * q)), 4))
                        continue
                    half = b.shl(b.and_(row, _c(1)), _c(4))  # bit offset of this row's half
                    for c in range(8):
                        w = self.peek(b, b.add(self.warp_base, b.add(_c(4 * c), b.lshr(row, _c(1)))), 1 + i)
                        x = b.trunc(b.lshr(w, half), I16)
                        b.store(x, self.shared_ptr(b, b.add(own, _c(2 * c)), 2))
            return []

        self.collective(b, "warp", [byte_offset] + list(words), write)

    def mma(self: "HostDevice", b: ir.IRBuilder, choice: Any, a: list[ir.Value], bb: list[ir.Value],
            c: list[ir.Value]) -> list[ir.Value]:
        """`mma.sync.m16n8kK`: thread (g = lane // 4, q = lane % 4) computes its four
        accumulators (rows g and g + 8, columns 2q and 2q + 1) from the elements the
        PTX fragment tables place in other lanes' `a` (four) and `bb` (two) registers:
        fma in f32 (fp8 operands too); an f16 accumulator (`c` its four elements: the device packs them)
        sums so from its f32 value and is rounded to f16 once at the end of the
        instruction; int8 sums are exact and saturate to the int32 range at the end
        (`.satfinite`)."""
        g, q = b.lshr(self.lane, _c(2)), b.and_(self.lane, _c(3))
        kw, bits = choice.k_width, 8 * choice.elem_bytes

        def element(holder: ir.Value, word: int, packed: int) -> ir.Value:
            w = self.peek(b, b.add(self.warp_base, holder), word)
            raw = b.trunc(b.lshr(w, _c(packed * bits)), ir.IntType(bits)) if bits < 32 else w
            if choice.ab_type == "f16":
                return b.fpext(b.bitcast(raw, ir.HalfType()), F32)
            if choice.ab_type == "bf16":
                return b.bitcast(b.shl(b.zext(raw, I32), _c(16)), F32)
            if choice.ab_type == "tf32":  # the hardware ignores an operand's low 13 bits
                return b.bitcast(b.and_(raw, _c(-0x2000)), F32)
            if choice.ab_type in ("e4m3", "e5m2"):  # exact in f32
                return casts.fp8_to_f32(b, raw, "f8" + choice.ab_type)
            return b.sext(raw, I32)  # s8

        def read() -> list[ir.Value]:
            out = []
            for i in range(4):
                col = b.add(b.shl(q, _c(1)), _c(i & 1))
                acc = c[i]
                if choice.acc_type == "f16":
                    acc = b.fpext(acc, F32)
                elif choice.acc_type == "s32":  # .satfinite: exact sums, clamped at the end
                    acc = b.sext(acc, I64)
                for k in range(choice.k):
                    packed, quad, hi = k % kw, (k // kw) % 4, k // (4 * kw)
                    x = element(b.add(b.shl(g, _c(2)), _c(quad)), (i >> 1) + 2 * hi, packed)
                    y = element(b.add(b.shl(col, _c(2)), _c(quad)), 4 + hi, packed)
                    if choice.acc_type == "s32":
                        acc = b.add(acc, b.sext(b.mul(x, y), I64))
                    else:
                        acc = intrinsic(b, "fma", [x, y, acc])
                if choice.acc_type == "f16":  # accumulated in f16: rounded once per instruction
                    acc = b.fptrunc(acc, F16)
                elif choice.acc_type == "s32":
                    acc = b.trunc(_clamp(b, acc, -2**31, 2**31 - 1), I32)
                out.append(acc)
            return out

        return self.collective(b, "warp", list(a) + list(bb), read)
