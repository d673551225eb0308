"""The CPU lowering of `reduce` (a mixin of `lower.CpuLowering`).

- A combine that is one exact or reorderable op of the two elements (integer add, mul
  and bitwise ops, max/min of any type, f32/f64 add) runs as a linear loop. Along the
  last axis: one accumulator from the op's identity (float adds marked `reassoc`, so
  LLVM keeps vector partial sums in registers), a float sum over blocks of
  `_SUM_BLOCK` values whose sums fold pairwise, and float max/min over a row of
  partial results (four vector registers' worth) folded pairwise. Along another axis,
  a row of accumulators updated row after row (the inner loop runs along contiguous
  elements), a float sum adding blocks of about sqrt(n) rows first. So a float sum's
  order is the GPU's kind (short sequential runs joined by a tree, docs/numerics.md):
  no chain of additions is longer than 512 along a row or about 2 sqrt(n) along other
  axes, where one chain of n - 1 had an error growing with n. Integer results and
  max/min are exact in any order; f16/bf16 adds keep the interpreter's tree (each
  combine rounds to the narrow type, and the suite checks that order).
- Any other combine: the interpreter's tree over the axis, pairing adjacent elements
  level by level.
"""
from __future__ import annotations

from typing import Optional

import llvmlite.ir as ir

from ...ir.core import Block, Instr
from ...ir.ops import Op
from ...ir.types import ScalarType, element_of, shape_of
from ..llvm import host_jit
from ..llvm.types import I64, llvm_type
from .tiles import Tile, axis_split

_LINEAR = frozenset({Op.ADD, Op.MUL, Op.MAXIMUM, Op.MINIMUM, Op.AND, Op.OR, Op.XOR})
# values per block of a float sum along a row (see `_reduce`): long enough that the
# vectorized loop's horizontal reduction per block costs nothing measurable (softmax
# 4096x1024: 0.63 ms, as one block; 128 cost +10-20%), short enough that an unvectorized
# chain stays far from the 32000 of a vocabulary-sized row
_SUM_BLOCK = 512


def _identity(op: Op, e: ScalarType) -> ir.Constant:
    """The element `x` with op(x, y) == y for every y of type `e` (for a float add,
    -0.0: -0.0 + y is y for every y, +0.0 and NaN included)."""
    ty = llvm_type(e)
    if e.is_float:
        assert op is Op.ADD, op
        return ir.Constant(ty, -0.0)
    bits = 1 if e.is_bool else e.bits
    signed = e.is_signed and not e.is_bool
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    value = {Op.ADD: 0, Op.OR: 0, Op.XOR: 0, Op.MUL: 1, Op.AND: -1 if signed else hi,
             Op.MAXIMUM: lo, Op.MINIMUM: hi}[op]
    if value >= 1 << (bits - 1) and bits > 1:
        value -= 1 << bits  # the same bits, written as LLVM prints constants
    return ir.Constant(ty, value)


class ReduceOps:
    """Methods of CpuLowering (see `lower.py` for `self.b`, `self.loop`, tiles)."""

    def _linear_op(self, ins: Instr) -> Optional[Op]:
        """The op of a combine region `op(a, b)` (either operand order) that the linear
        loop may run, or None."""
        if len(ins.operands) != 1 or len(ins.results) != 1:
            return None
        region = ins.regions[0]
        if len(region.instrs) != 2 or region.instrs[1].op is not Op.YIELD:
            return None
        x, y = region.instrs
        if x.op not in _LINEAR or len(x.operands) != 2 or set(map(id, x.operands)) != set(map(id, region.args)):
            return None
        if y.operands[0] is not x.result:
            return None
        e = element_of(ins.operands[0].type)
        if e.is_float and x.op in (Op.ADD, Op.MUL) and (x.op is Op.MUL or e.name not in ("f32", "f64")):
            return None
        return x.op

    def op_reduce(self, ins: Instr) -> None:
        # an expensive operand with other users is computed here, element by element,
        # and stored as it is read (every path below reads each element once)
        stored = [(v, self.store_through(v)) for v in ins.operands]
        known = self.fused_mask_facts(ins.operands)
        if known is None or not all(not shape_of(r.type) for r in ins.results):
            self._reduce(ins)
        else:
            # two copies of the loop: in the first, the masks it computes are known to
            # be all true (LLVM folds them away: `tl.where(offs < n, x, 0)` is x there)
            b = self.b
            slots = [self.alloca_b.alloca(llvm_type(element_of(r.type))) for r in ins.results]
            with b.if_else(known) as (then, otherwise):
                for branch in (then, otherwise):
                    with branch:
                        self._reduce(ins)
                        for r, slot in zip(ins.results, slots):
                            b.store(self.env[id(r)], slot)
            for r, slot in zip(ins.results, slots):
                self.env[id(r)] = b.load(slot)
        for v, t in stored:
            if t is not None:
                self.env[id(v)] = t

    def _reduce(self, ins: Instr) -> None:
        op = self._linear_op(ins)
        if op is None:
            self._reduce_tree(ins)
            return
        b = self.b
        axis = ins.attrs.axis
        src = ins.operands[0]
        shape = tuple(shape_of(src.type))
        outer, n, inner = axis_split(shape, axis)
        region = ins.regions[0]
        r = ins.result
        c64 = lambda x: ir.Constant(I64, x)  # noqa: E731
        reassoc = element_of(src.type).is_float and op is Op.ADD

        def combine(acc, x):
            v = self.combine(region, [acc], [x])[0]
            if reassoc and isinstance(v, ir.Instruction) and v.opname == "fadd":
                v.flags.append("reassoc")
            return v
        e = element_of(src.type)
        lanes = host_jit.simd_bytes() // max(e.bits // 8, 1)
        if inner == 1 and e.is_float and op in (Op.MAXIMUM, Op.MINIMUM):
            if n < 2 or n & (n - 1):
                self._reduce_tree(ins)
                return
            # four registers of partial results: four independent max chains (one
            # chain is latency-bound: ~5 cycles per vector for max + NaN select)
            lanes = min(4 * lanes, n // 2)
            # a row of `lanes` partial results updated elementwise, then folded
            # pairwise (no loop-carried scalar for LLVM to vectorize): LLVM's
            # own vectorization of a NaN-ignoring fmax/fmin reduction (with its early
            # exit on NaN) dropped the tail of the row (LLVM 20, no unrolling): 4 of 32
            # wrong maxima in tests/numerics/test_reduce.py
            part = self.alloca_b.alloca(ir.ArrayType(llvm_type(e), lanes))
            slot = self.alloca_b.alloca(llvm_type(e))
            out = self.new_tile(r.type) if shape_of(r.type) else None
            lane = lambda k: b.gep(part, [c64(0), k], inbounds=True)  # noqa: E731

            def per_outer_lanes(io):
                base = b.mul(io, c64(n))
                self.loop(lanes, lambda k: b.store(self.get(src, b.add(base, k)), lane(k)))

                def chunk(j):
                    row = b.add(base, b.mul(b.add(j, c64(1)), c64(lanes)))
                    self.loop(lanes, lambda k: b.store(combine(b.load(lane(k)), self.get(src, b.add(row, k))),
                                                       lane(k)))
                self.loop(n // lanes - 1, chunk)
                half = lanes // 2
                while half:  # fold the partial results pairwise: elementwise steps again
                    self.loop(half, lambda k, h=half: b.store(combine(b.load(lane(k)), b.load(lane(b.add(k, c64(h))))),
                                                              lane(k)))
                    half //= 2
                b.store(b.load(lane(c64(0))), slot)
                if out is not None:
                    b.store(b.load(slot), self.elem_ptr(out, io))
            self.loop(outer, per_outer_lanes)
            self.env[id(r)] = out if out is not None else b.load(slot)
            return
        if inner == 1:
            slot = self.alloca_b.alloca(llvm_type(element_of(r.type)))
            out = self.new_tile(r.type) if shape_of(r.type) else None
            # from the op's identity over all n elements: one loop of a round trip
            # count, which LLVM vectorizes without a peeled first element
            unit = _identity(op, e)
            # A float sum runs that loop over blocks of _SUM_BLOCK values and folds the
            # block sums pairwise: where LLVM vectorizes the loop (`reassoc`) it keeps
            # vector partial sums in registers as before; where it cannot (the summed
            # values come one at a time, e.g. a libdevice tanh each) no chain of
            # additions is longer than a block, where it was all n (liger-kernel's cross
            # entropy over a 32000-word vocabulary missed its 1e-6 tolerance by 8e-6).
            block = _SUM_BLOCK if reassoc and n > _SUM_BLOCK and not n & (n - 1) else n
            sums = self.alloca_b.alloca(ir.ArrayType(llvm_type(e), n // block)) if block < n else None

            def per_outer(io):
                base = b.mul(io, c64(n))

                def one_block(k):
                    first = b.add(base, b.mul(k, c64(block)))
                    b.store(unit, slot)

                    def step(j):
                        x = self.get(src, b.add(first, j))
                        b.store(combine(b.load(slot), x), slot)
                    self.loop(block, step)
                    if sums is not None:
                        b.store(b.load(slot), b.gep(sums, [c64(0), k], inbounds=True))
                if sums is None:
                    one_block(c64(0))
                else:
                    self.loop(n // block, one_block)
                    at = lambda k: b.gep(sums, [c64(0), k], inbounds=True)  # noqa: E731
                    half = n // block // 2
                    while half:  # the block sums pairwise
                        self.loop(half, lambda k, h=half: b.store(combine(b.load(at(k)), b.load(at(b.add(k, c64(h))))),
                                                                  at(k)))
                        half //= 2
                    b.store(b.load(at(c64(0))), slot)
                if out is not None:
                    b.store(b.load(slot), self.elem_ptr(out, io))
            self.loop(outer, per_outer)
            self.env[id(r)] = out if out is not None else b.load(slot)
            return
        out = self.new_tile(r.type)
        # a float sum adds blocks of `rows` rows into a row of block sums first, so no
        # element's chain is longer than about 2 * sqrt(n) additions (n - 1 otherwise)
        rows = n
        if reassoc and n >= 64 and not n & (n - 1):
            rows = 1 << (n.bit_length() // 2)  # 2 ** ceil(log2(n) / 2)
        block_sum = self.alloca_b.alloca(ir.ArrayType(llvm_type(e), inner)) if rows < n else None

        def sum_rows(base, first, count, dst):
            """dst[ii] = src[first][ii] combined with the next count - 1 rows."""
            self.loop(inner, lambda ii: b.store(self.get(src, b.add(b.add(base, b.mul(first, c64(inner))), ii)),
                                                dst(ii)))

            def per_row(j):
                row = b.add(base, b.mul(b.add(first, b.add(j, c64(1))), c64(inner)))

                def one(ii):
                    p = dst(ii)
                    b.store(combine(b.load(p), self.get(src, b.add(row, ii))), p)
                self.loop(inner, one)
            if count > 1:
                self.loop(count - 1, per_row)

        def per_outer_rows(io):
            base = b.mul(io, c64(n * inner))
            obase = b.mul(io, c64(inner))
            out_at = lambda ii: self.elem_ptr(out, b.add(obase, ii))  # noqa: E731
            sum_rows(base, c64(0), rows, out_at)
            if block_sum is None:
                return
            block_at = lambda ii: b.gep(block_sum, [c64(0), ii], inbounds=True)  # noqa: E731

            def per_block(k):
                sum_rows(base, b.mul(b.add(k, c64(1)), c64(rows)), rows, block_at)
                self.loop(inner, lambda ii: b.store(combine(b.load(out_at(ii)), b.load(block_at(ii))), out_at(ii)))
            self.loop(n // rows - 1, per_block)
        self.loop(outer, per_outer_rows)
        self.env[id(r)] = out

    def combine(self, region: Block, acc: list, xs: list) -> list:
        for a, v in zip(region.args, acc + xs):
            self.env[id(a)] = v
        for ins in region.instrs:
            if ins.op is Op.YIELD:
                return [self.get(o) for o in ins.operands]
            if shape_of(ins.results[0].type) if ins.results else False:
                raise self.fail(ins, "tile values inside a combine function")
            self.instr(ins)
        raise self.fail(region.instrs[-1] if region.instrs else None, "combine region without yield")

    def _reduce_tree(self, ins: Instr) -> None:
        """A tree over the axis pairing adjacent elements, level by level, as the
        interpreter does (so float results round identically)."""
        axis = ins.attrs.axis
        srcs = [self.env[id(o)] for o in ins.operands]
        shape = tuple(shape_of(ins.operands[0].type))
        outer, n, inner = axis_split(shape, axis)
        outs = [self.new_tile(r.type) if shape_of(r.type) else self.alloca_b.alloca(llvm_type(element_of(r.type)))
                for r in ins.results]
        region = ins.regions[0]
        b = self.b
        scratch = [self.alloca_b.alloca(ir.ArrayType(s.elem, n)) for s in srcs]
        at = lambda buf, k: b.gep(buf, [ir.Constant(I64, 0), k], inbounds=True)  # noqa: E731

        def per_outer(io):
            def per_inner(ii):
                base = b.add(b.mul(io, ir.Constant(I64, n * inner)), ii)

                def gather(j):
                    idx = b.add(base, b.mul(j, ir.Constant(I64, inner)))
                    for o, t in zip(ins.operands, scratch):
                        b.store(self.get(o, idx), at(t, j))
                self.loop(n, gather)
                m = n
                while m > 1:
                    half = m // 2

                    def level(k):
                        two = b.mul(k, ir.Constant(I64, 2))
                        acc = [b.load(at(t, two)) for t in scratch]
                        xs = [b.load(at(t, b.add(two, ir.Constant(I64, 1)))) for t in scratch]
                        for t, v in zip(scratch, self.combine(region, acc, xs)):
                            b.store(v, at(t, k))
                    self.loop(half, level)
                    if m % 2:
                        for t in scratch:
                            b.store(b.load(at(t, ir.Constant(I64, m - 1))), at(t, ir.Constant(I64, half)))
                    m = half + m % 2
                out_i = b.add(b.mul(io, ir.Constant(I64, inner)), ii)
                for o, t in zip(outs, scratch):
                    v = b.load(at(t, ir.Constant(I64, 0)))
                    b.store(v, self.elem_ptr(o, out_i) if isinstance(o, Tile) else o)
            self.loop(inner, per_inner)
        self.loop(outer, per_outer)
        for r, o in zip(ins.results, outs):
            self.env[id(r)] = o if isinstance(o, Tile) else b.load(o)

