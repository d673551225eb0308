"""The CPU lowering of scan, atomics, device_assert and the
index-permuting shape ops (permute, join, split): a mixin of `lower.CpuLowering`, kept
apart so each file stays about one thing.

- scan: the interpreter's Hillis-Steele order (distance 1, 2, 4, ...), in place from the
  end of the line so each step reads the previous step's values.
- atomics: LLVM `atomicrmw` / `cmpxchg` (seq_cst), since programs run concurrently;
  float max/min and narrow float adds go through a compare-exchange loop.
"""
from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from ...ir.accessors import memory_operands
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import F64, ScalarType, element_of, shape_of
from ..llvm import casts
from ..llvm.scalar_ops import lower_op
from ..llvm.types import I32, I64, llvm_type, memory_type
from .tiles import axis_split


def _strides(shape: tuple) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return list(reversed(out))


class MoreOps:
    """Methods of CpuLowering (see `lower.py` for `self.b`, `self.loop`, tiles)."""

    # ---- index-permuting shape ops ------------------------------------------------
    def _remap(self, ins: Instr, result: Any, src: Any, src_index) -> None:
        """result[i] = src[src_index(multi-index of i)] for a tile result."""
        b = self.b
        shape = tuple(shape_of(result.type))
        strides = _strides(shape)
        t = self.new_tile(result.type)

        def fill(i):
            idx = [b.urem(b.udiv(i, ir.Constant(I64, s)), ir.Constant(I64, d)) for s, d in zip(strides, shape)]
            v = b.load(self.elem_ptr(src, src_index(idx)), typ=src.elem)
            b.store(v, self.elem_ptr(t, i))
        self.loop(max(t.buf.allocated_type.count, 1), fill)
        self.env[id(result)] = t

    def _linear(self, idx: list, shape: tuple) -> ir.Value:
        b = self.b
        out = ir.Constant(I64, 0)
        for k, s in zip(idx, _strides(shape)):
            out = b.add(out, b.mul(k, ir.Constant(I64, s)))
        return out

    def op_permute(self, ins: Instr) -> None:
        src = self.tile(ins.operands[0])
        order = ins.attrs.order
        inv = [0] * len(order)
        for r, o in enumerate(order):
            inv[o] = r
        self.origin[id(ins.result)] = self.origin.get(id(ins.operands[0]))
        # result dim r is source dim order[r]
        self._remap(ins, ins.result, src, lambda idx: self._linear([idx[inv[d]] for d in range(len(order))],
                                                                   src.shape))

    def op_join(self, ins: Instr) -> None:
        a, c = (self.tile(o) for o in ins.operands)
        a = self._as_tile(ins.operands[0], a)
        c = self._as_tile(ins.operands[1], c)
        b = self.b
        t = self.new_tile(ins.result.type)
        total = 1
        for d in a.shape:
            total *= d

        def fill(i):
            two = b.mul(i, ir.Constant(I64, 2))
            b.store(b.load(self.elem_ptr(a, i), typ=a.elem), self.elem_ptr(t, two))
            b.store(b.load(self.elem_ptr(c, i), typ=c.elem), self.elem_ptr(t, b.add(two, ir.Constant(I64, 1))))
        self.loop(total, fill)
        self.env[id(ins.result)] = t

    def _as_tile(self, v: Any, x: Any) -> Any:
        from .lower import Tile
        if isinstance(x, Tile):
            return x
        t = self.new_tile(v.type) if shape_of(v.type) else None
        if t is None:
            # a rank-0 operand: a one-element buffer
            buf = self.alloca_b.alloca(ir.ArrayType(x.type, 1))
            t = Tile(buf, v.type)
            self.b.store(x, self.elem_ptr(t, ir.Constant(I64, 0)))
        return t

    def op_split(self, ins: Instr) -> None:
        src = self.tile(ins.operands[0])
        b = self.b
        for k, r in enumerate(ins.results):
            if not shape_of(r.type):
                self.env[id(r)] = b.load(self.elem_ptr(src, ir.Constant(I64, k)), typ=src.elem)
                continue
            t = self.new_tile(r.type)
            total = 1
            for d in shape_of(r.type):
                total *= d

            def fill(i, t=t, k=k):
                j = b.add(b.mul(i, ir.Constant(I64, 2)), ir.Constant(I64, k))
                b.store(b.load(self.elem_ptr(src, j), typ=src.elem), self.elem_ptr(t, i))
            self.loop(total, fill)
            self.env[id(r)] = t

    # ---- scan ---------------------------------------------------------------------
    def op_scan(self, ins: Instr) -> None:
        axis = ins.attrs.axis
        reverse = bool(getattr(ins.attrs, "reverse", False))
        srcs = [self.env[id(o)] for o in ins.operands]
        shape = tuple(shape_of(ins.operands[0].type))
        outer, n, inner = axis_split(shape, axis)
        outs = [self.new_tile(r.type) for r in ins.results]
        region = ins.regions[0]
        b = self.b
        scratch = [self.alloca_b.alloca(ir.ArrayType(s.elem, n)) for s in srcs]
        at = lambda buf, k: b.gep(buf, [ir.Constant(I64, 0), k], inbounds=True)  # noqa: E731

        def pos(j):
            return b.sub(ir.Constant(I64, n - 1), j) if reverse else j

        def per_outer(io):
            def per_inner(ii):
                base = b.add(b.mul(io, ir.Constant(I64, n * inner)), ii)

                def gather(j):
                    idx = b.add(base, b.mul(pos(j), ir.Constant(I64, inner)))
                    for o, t in zip(ins.operands, scratch):
                        b.store(self.get(o, idx), at(t, j))
                self.loop(n, gather)
                d = 1
                while d < n:
                    # j from n-1 down to d: t[j] = combine(t[j-d], t[j]) reads old t[j-d]
                    def step(k, d=d):
                        j = b.sub(ir.Constant(I64, n - 1), k)
                        jd = b.sub(j, ir.Constant(I64, d))
                        xs = [b.load(at(t, jd)) for t in scratch]
                        ys = [b.load(at(t, j)) for t in scratch]
                        for t, v in zip(scratch, self.combine(region, xs, ys)):
                            b.store(v, at(t, j))
                    self.loop(n - d, step)
                    d *= 2

                def scatter(j):
                    idx = b.add(base, b.mul(pos(j), ir.Constant(I64, inner)))
                    for o, t in zip(outs, scratch):
                        b.store(b.load(at(t, j)), self.elem_ptr(o, idx))
                self.loop(n, scatter)
            self.loop(inner, per_inner)
        self.loop(outer, per_outer)
        for r, o in zip(ins.results, outs):
            self.env[id(r)] = o

    # ---- atomics ------------------------------------------------------------------
    def op_atomic_rmw(self, ins: Instr) -> None:
        attrs = ins.attrs
        parts = memory_operands(ins)
        ptr_v, val_v, mask_v = parts.pointer, parts.value, parts.mask
        elem = element_of(ptr_v.type).pointee
        kind = attrs.kind
        mty = memory_type(elem)

        def do(p, i):
            b = self.b
            v = self.get(val_v, i)
            if isinstance(elem, ScalarType) and elem.is_bool:
                v = b.zext(v, mty)
            if not elem.is_float:
                op = {"add": "add", "and": "and", "or": "or", "xor": "xor", "xchg": "xchg",
                      "max": "max" if elem.is_signed else "umax", "min": "min" if elem.is_signed else "umin"}[kind]
                old = b.atomic_rmw(op, p, v, "seq_cst")
                return b.trunc(old, llvm_type(elem)) if elem.is_bool else old
            # floats: a compare-exchange loop on the bit pattern, the update computed as
            # the interpreter does (narrow adds formed in f64 and rounded once)
            ity = ir.IntType(elem.bits)
            pre = b.block
            loop_bb = self.fn.append_basic_block("cas")
            done_bb = self.fn.append_basic_block("cas.done")
            first = b.load(p, typ=ity)
            b.branch(loop_bb)
            b.position_at_end(loop_bb)
            cur = b.phi(ity)
            cur.add_incoming(first, pre)
            old = b.bitcast(cur, llvm_type(elem))
            if kind == "xchg":
                new = v
            elif kind in ("add", "fadd") and elem.name in ("f32", "f64"):
                new = b.fadd(old, v)
            elif kind in ("add", "fadd"):
                s = b.fadd(casts.convert(b, self.target, old, elem, F64), casts.convert(b, self.target, v, elem, F64))
                new = casts.convert(b, self.target, s, F64, elem)
            else:
                op = Op.MAXIMUM if kind == "max" else Op.MINIMUM
                new = lower_op(b, self.target, op, None, [old, v], [elem, elem], elem)
            res = b.cmpxchg(p, cur, b.bitcast(new, ity), "seq_cst", "seq_cst")
            cur.add_incoming(b.extract_value(res, 0), b.block)
            b.cbranch(b.extract_value(res, 1), done_bb, loop_bb)
            b.position_at_end(done_bb)
            return old
        self._access(ins, "atomic", ptr_v, mask_v, None, do)

    def op_atomic_cas(self, ins: Instr) -> None:
        ptr_v, cmp_v, val_v = ins.operands
        elem = element_of(ptr_v.type).pointee
        ity = ir.IntType(max(elem.bits, 8))

        def do(p, i):
            b = self.b
            c, v = self.get(cmp_v, i), self.get(val_v, i)
            to_i = lambda x: b.bitcast(x, ity) if x.type != ity else x  # noqa: E731
            res = b.cmpxchg(p, to_i(c), to_i(v), "seq_cst", "seq_cst")
            old = b.extract_value(res, 0)
            return b.bitcast(old, llvm_type(elem)) if llvm_type(elem) != ity else old
        self._access(ins, "atomic", ptr_v, None, None, do)

    # ---- assert -------------------------------------------------------------------
    def op_device_assert(self, ins: Instr) -> None:
        b = self.b
        cond_v = ins.operands[0]
        message = ins.attrs.message if ins.attrs is not None else ""
        text = f"device assertion failed: {message}"
        if not shape_of(cond_v.type):
            self.runtime_error(ins, b.not_(self.get(cond_v)), "assert", text)
            return
        count = self.alloca_b.alloca(I64)
        first = self.alloca_b.alloca(I64)
        b.store(ir.Constant(I64, 0), count)

        def one(i):
            with b.if_then(b.not_(self.get(cond_v, i))):
                n = b.load(count)
                with b.if_then(b.icmp_signed("==", n, ir.Constant(I64, 0))):
                    b.store(i, first)
                b.store(b.add(n, ir.Constant(I64, 1)), count)
        total = 1
        for d in shape_of(cond_v.type):
            total *= d
        self.loop(total, one)
        self.runtime_error(ins, b.icmp_signed(">", b.load(count), ir.Constant(I64, 0)), "assert_tile", text,
                           [b.load(count), b.load(first), ir.Constant(I64, total)], tuple(shape_of(cond_v.type)))

    # ---- device_print -------------------------------------------------------------
    def op_device_print(self, ins: Instr) -> None:
        """One `printf` line per element, in the interpreter's format (see its
        rules_debug): `pid (X, Y, Z) idx (I, J)<prefix>[(operand N) ]<value>`; programs
        print concurrently, so lines of different programs may interleave."""
        import math

        from ...ir.types import PointerType
        b = self.b
        prefix = ins.attrs.prefix if ins.attrs is not None else ""
        hex_ = bool(ins.attrs.hex) if ins.attrs is not None else False
        pid = [b.zext(p, I64) for p in self.pid]
        esc = lambda t: t.replace("%", "%%")  # noqa: E731
        if not ins.operands:
            self._printf(f"pid (%lld, %lld, %lld){esc(prefix)}\n", pid)
            return
        many = len(ins.operands) > 1
        for k, v in enumerate(ins.operands):
            elem = element_of(v.type)
            shape = tuple(shape_of(v.type))
            tag = f"(operand {k}) " if many else ""
            if isinstance(elem, PointerType):
                vfmt, conv = "0x%llx", lambda x: b.ptrtoint(x, I64)
            elif hex_:
                ity = ir.IntType(elem.bits)
                vfmt = f"0x%0{elem.bits // 4}llx"
                conv = lambda x, ity=ity: b.zext(b.bitcast(x, ity) if x.type != ity else x, I64) \
                    if ity.width < 64 else b.bitcast(x, ity) if x.type != ity else x
            elif elem.is_float:
                vfmt = "%f"
                conv = lambda x, elem=elem: casts.convert(b, self.target, x, elem, F64) if elem.name != "f64" else x
            elif elem.is_signed and not elem.is_bool:
                vfmt, conv = "%lld", lambda x: b.sext(x, I64) if x.type.width < 64 else x
            else:
                vfmt, conv = "%llu", lambda x: b.zext(x, I64) if x.type.width < 64 else x
            widths = [math.ceil(math.log10(d)) if d > 0 else 0 for d in shape]
            idx_fmt = ", ".join(f"%{w}lld" if w else "%lld" for w in widths)
            fmt = f"pid (%lld, %lld, %lld) idx ({idx_fmt}){esc(prefix)}{esc(tag)}{vfmt}\n"
            if not shape:
                self._printf(fmt, pid + [conv(self.get(v))])
                continue
            strides = _strides(shape)

            def one(i, v=v, shape=shape, strides=strides, fmt=fmt, conv=conv):
                idx = [b.urem(b.udiv(i, ir.Constant(I64, s)), ir.Constant(I64, d)) for s, d in zip(strides, shape)]
                self._printf(fmt, pid + idx + [conv(self.get(v, i))])
            total = 1
            for d in shape:
                total *= d
            self.loop(total, one)

    def _printf(self, fmt: str, args: list) -> None:
        b = self.b
        mod = self.module
        printf = mod.globals.get("printf")
        if printf is None:
            printf = ir.Function(mod, ir.FunctionType(I32, [ir.PointerType()], var_arg=True), "printf")
        data = bytearray(fmt.encode() + b"\0")
        name = f".fmt{len([g for g in mod.globals if g.startswith('.fmt')])}"
        g = ir.GlobalVariable(mod, ir.ArrayType(ir.IntType(8), len(data)), name)
        g.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(data)), data)
        g.global_constant = True
        g.linkage = "private"
        b.call(printf, [b.bitcast(g, ir.PointerType()), *args])
