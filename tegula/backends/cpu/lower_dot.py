"""The CPU lowering of `tl.dot` (a mixin of `lower.CpuLowering`).

- Float inputs with an f32 accumulator and result: a register-blocked micro-kernel in
  explicit LLVM vectors of the host's SIMD width (`host_jit.simd_bytes`): a block of
  RB rows × CB vectors of the accumulator, sized to the host's SIMD registers
  (`register_block`), lives in registers over the whole k loop;
  each k step loads CB vectors of a row of b, broadcasts RB elements of a column of a
  and does RB·CB vector FMAs. Each accumulator element is a chain of K FMAs in f32 in
  k order, as on the GPU (docs/numerics.md bounds it; f16/bf16/fp8 and tf32-rounded
  products are exact in f32, so there it equals the interpreter's f32 sum of exact
  products in k order up to the final rounding: γ_K). Narrow inputs are widened to f32
  buffers first, tf32 inputs rounded once per element (ties away, as the interpreter).
- Everything else (f64, integer, narrow accumulators): `acc + a @ b` as an i-k-j loop
  nest whose inner loop LLVM vectorizes; f32 sums exact products in f64 (the
  interpreter's single rounding), narrower floats accumulate in f32, integers in i64.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.types import F32, F64, element_of, shape_of
from ...ir.types import I64 as T_I64
from ..llvm import casts, host_jit
from ..llvm.intrinsics import intrinsic
from ..llvm.types import I32, I64, llvm_type

_F32 = ir.FloatType()


def register_block(m: int, nvec: int, registers: int) -> tuple[int, int]:
    """(rows, vectors per row) of the accumulator block a dot keeps in registers: up to
    4 vectors of a row of b, and as many rows (a power of two dividing `m`, at most 16
    accumulators) as fit in the registers beside them and a broadcast of a. On AVX2's
    16 registers the 4x4 block that suits AVX-512 spilled half its accumulators on
    every k step: 1024^3 on one thread 113-120 ms, 2x4 37-40 ms (docs/performance.md,
    session 8)."""
    cb = min(nvec, 4)
    rb = 1
    while rb * 2 <= m and m % (rb * 2) == 0 and rb * 2 * cb <= 16 and (rb * 2 + 1) * cb + 1 <= registers:
        rb *= 2
    return rb, cb


class DotOps:
    """Methods of CpuLowering (see `lower.py` for `self.b`, `self.loop`, tiles)."""

    def op_dot(self, ins: Instr) -> None:
        a_v, b_v, acc_v = ins.operands[:3]
        ea, eb, eacc = element_of(a_v.type), element_of(b_v.type), element_of(acc_v.type)
        eo = element_of(ins.result.type)
        n = tuple(shape_of(b_v.type))[-1]
        width = host_jit.simd_bytes() // 4
        while width > 1 and n % width:
            width //= 2
        if ea.is_float and eb.is_float and eacc.name == "f32" and eo.name == "f32" and ea.bits <= 32 \
                and eb.bits <= 32 and width >= 4:
            self._dot_f32(ins, width)
        else:
            self._dot_loops(ins)

    def _f32_operand(self, v, tf32: bool):
        """Operand `v` as an f32 tile buffer (widened, or rounded to tf32)."""
        b = self.b
        elem = element_of(v.type)
        if elem.name == "f32" and not tf32:
            return self.tile(v)
        from .tiles import Tile
        buf = self.alloca_b.alloca(ir.ArrayType(_F32, max(self._count(v), 1)))
        buf.align = 64
        t = Tile(buf, v.type)

        def one(i):
            x = self.get(v, i)
            if elem.name != "f32":
                x = casts.convert(b, self.target, x, elem, F32)
            elif tf32:
                bits = b.bitcast(x, I32)
                r = b.and_(b.add(bits, ir.Constant(I32, 0x1000)), ir.Constant(I32, -0x2000))
                x = b.select(b.fcmp_unordered("uno", x, x), x, b.bitcast(r, _F32))
            b.store(x, b.gep(buf, [ir.Constant(I64, 0), i], inbounds=True))
        self.loop(self._count(v), one)
        return t

    @staticmethod
    def _count(v) -> int:
        n = 1
        for d in shape_of(v.type):
            n *= d
        return n

    def _dot_f32(self, ins: Instr, width: int) -> None:
        b = self.b
        a_v, b_v, acc_v = ins.operands[:3]
        shape_a, shape_b = tuple(shape_of(a_v.type)), tuple(shape_of(b_v.type))
        batch = shape_a[0] if len(shape_a) == 3 else 1
        M, K = shape_a[-2], shape_a[-1]
        N = shape_b[-1]
        tf32 = getattr(ins.attrs, "input_precision", "ieee") == "tf32"
        A = self._f32_operand(a_v, tf32 and element_of(a_v.type).name == "f32")
        B = self._f32_operand(b_v, tf32 and element_of(b_v.type).name == "f32")
        C = self.tile(acc_v)
        # a loop-carried accumulator read only here is updated in place (each register
        # block is read before it is written; the yield then has nothing to copy)
        owner = getattr(acc_v, "owner", None)
        in_place = self.single_use.get(id(acc_v)) and not isinstance(owner, Instr) and not C.flat
        out = C if in_place else self.new_tile(ins.result.type)
        vty = ir.VectorType(_F32, width)
        nvec = N // width
        rb, cb = register_block(M, nvec, host_jit.simd_registers())
        c64 = lambda x: ir.Constant(I64, x)  # noqa: E731
        undef = ir.Constant(vty, ir.Undefined)
        zeros = ir.Constant(ir.VectorType(I32, width), [0] * width)

        def vptr(t, idx):
            return b.bitcast(self.elem_ptr(t, idx), vty.as_pointer())

        def vload(t, idx):
            return b.load(vptr(t, idx), typ=vty, align=4)

        def block(a0, b0, c0, i0, j0, rb):
            """Rows [i0, i0 + rb) x vectors [j0, j0 + cb * width) of the accumulator, in
            registers over the whole k loop."""
            cidx = [[b.add(c0, b.add(b.mul(b.add(i0, c64(r)), c64(N)), b.add(j0, c64(c * width))))
                     for c in range(cb)] for r in range(rb)]
            init = [[vload(C, cidx[r][c]) for c in range(cb)] for r in range(rb)]
            pre = b.block
            head = self.fn.append_basic_block("dot.k")
            after = self.fn.append_basic_block("dot.k.end")
            b.branch(head)
            b.position_at_end(head)
            k = b.phi(I64)
            k.add_incoming(c64(0), pre)
            accs = []
            for r in range(rb):
                row = []
                for c in range(cb):
                    p = b.phi(vty)
                    p.add_incoming(init[r][c], pre)
                    row.append(p)
                accs.append(row)
            brow = b.add(b0, b.add(b.mul(k, c64(N)), j0))
            bv = [vload(B, b.add(brow, c64(c * width))) for c in range(cb)]
            new = []
            for r in range(rb):
                a_idx = b.add(a0, b.add(b.mul(b.add(i0, c64(r)), c64(K)), k))
                a = b.load(self.elem_ptr(A, a_idx), typ=_F32)
                splat = b.shuffle_vector(b.insert_element(undef, a, ir.Constant(I32, 0)), undef, zeros)
                new.append([intrinsic(b, "fma", [splat, bv[c], accs[r][c]]) for c in range(cb)])
            nk = b.add(k, c64(1))
            k.add_incoming(nk, b.block)
            for r in range(rb):
                for c in range(cb):
                    accs[r][c].add_incoming(new[r][c], b.block)
            b.cbranch(b.icmp_signed("<", nk, c64(K)), head, after)
            b.position_at_end(after)
            for r in range(rb):
                for c in range(cb):
                    b.store(new[r][c], vptr(out, cidx[r][c]), align=4)

        def per_batch(bi):
            a0, b0, c0 = b.mul(bi, c64(M * K)), b.mul(bi, c64(K * N)), b.mul(bi, c64(M * N))

            def per_rows(ib):
                i0 = b.mul(ib, c64(rb))
                self.loop(nvec // cb, lambda jb: block(a0, b0, c0, i0, b.mul(jb, c64(cb * width)), rb))
            self.loop(M // rb, per_rows)
        self.loop(batch, per_batch)
        self.env[id(ins.result)] = out

    def _dot_loops(self, ins: Instr) -> None:
        b = self.b
        a_v, b_v, acc_v = ins.operands[:3]
        A, B, C = (self.tile(v) for v in (a_v, b_v, acc_v))
        ea, eacc = element_of(a_v.type), element_of(acc_v.type)
        shape_a, shape_b = tuple(shape_of(a_v.type)), tuple(shape_of(b_v.type))
        batch = shape_a[0] if len(shape_a) == 3 else 1
        M, K = shape_a[-2], shape_a[-1]
        N = shape_b[-1]
        if ea.is_float:
            # f32 inputs: exact products summed in f64, rounded once (the interpreter's
            # definition of an ieee / tf32 dot); narrower floats accumulate in f32
            ct = F64 if ea.name in ("f64", "f32") else F32
        else:
            ct = T_I64
        cty = llvm_type(ct)
        tf32 = ea.name == "f32" and getattr(ins.attrs, "input_precision", "ieee") == "tf32"
        work = self.alloca_b.alloca(ir.ArrayType(cty, batch * M * N))
        at = lambda k: b.gep(work, [ir.Constant(I64, 0), k], inbounds=True)  # noqa: E731
        conv = lambda v, src: casts.convert(b, self.target, v, src, ct)  # noqa: E731

        def operand(tile, idx, elem):
            v = b.load(self.elem_ptr(tile, idx), typ=tile.elem)
            if tf32 and elem.name == "f32":
                bits = b.bitcast(v, I32)
                r = b.and_(b.add(bits, ir.Constant(I32, 0x1000)), ir.Constant(I32, -0x2000))
                v = b.select(b.fcmp_unordered("uno", v, v), v, b.bitcast(r, v.type))
            v = conv(v, elem) if elem != ct else v
            return v

        def init(i):
            v = b.load(self.elem_ptr(C, i), typ=C.elem)
            b.store(conv(v, eacc) if eacc != ct else v, at(i))
        self.loop(batch * M * N, init)

        def per_batch(bi):
            def per_i(i):
                def per_k(k):
                    a_idx = b.add(b.mul(bi, ir.Constant(I64, M * K)), b.add(b.mul(i, ir.Constant(I64, K)), k))
                    a = operand(A, a_idx, ea)
                    row = b.add(b.mul(bi, ir.Constant(I64, K * N)), b.mul(k, ir.Constant(I64, N)))
                    out = b.add(b.mul(bi, ir.Constant(I64, M * N)), b.mul(i, ir.Constant(I64, N)))

                    def per_j(j):
                        x = operand(B, b.add(row, j), element_of(b_v.type))
                        slot = at(b.add(out, j))
                        cur = b.load(slot)
                        if ct.is_float:
                            b.store(b.fadd(cur, b.fmul(a, x)), slot)
                        else:
                            b.store(b.add(cur, b.mul(a, x)), slot)
                    self.loop(N, per_j)
                self.loop(K, per_k)
            self.loop(M, per_i)
        self.loop(batch, per_batch)
        t = self.new_tile(ins.result.type)
        eo = element_of(ins.result.type)
        self.loop(batch * M * N, lambda i: b.store(casts.convert(b, self.target, b.load(at(i)), ct, eo)
                                                   if eo != ct else b.load(at(i)), self.elem_ptr(t, i)))
        self.env[id(ins.result)] = t

