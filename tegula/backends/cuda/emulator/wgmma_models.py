"""Host models of Hopper's warpgroup tensor-core instructions, computed from the PTX
ISA's definitions rather than from the lowering's bookkeeping:

- `wgmma`: every thread computes its own accumulator fragment of `wgmma.mma_async
  .m64nNk16` (register i of warp w, lane l holds row 16(w % 4) + l / 4 + 8((i / 2) % 2),
  column 8(i / 4) + 2(l % 4) + i % 2), reading A and B straight from shared memory
  through the matrix descriptors: start address, leading byte offset (box to box along
  the contiguous dimension), stride byte offset (8-row group to the next) and the
  swizzle mode (the 16-byte chunk bits 4.. of the address XOR-ed with bits 7..). The
  products accumulate in f32 one k at a time (the hardware's order within an
  instruction is unspecified; results agree to rounding), int8 ones in wrapping i32;
  an f16 accumulator (`.f16x2` registers) is widened, summed so and rounded to f16 at
  the end of each instruction;
- `shared_address` is the offset into the CTA's shared buffer (which the model reads
  through `smem`);
  A false scale-d predicate (`scale_d=False`) starts from zero instead of the
  accumulators;
- `wgmma_fence`, `wgmma_commit`, `wgmma_wait`, `fence_proxy_async` order nothing on the
  host: the instruction completes at issue and shared memory has one proxy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import llvmlite.ir as ir

from ...llvm import casts
from ...llvm.types import F16, F32, I8, I16, I32, I64, ptr_type
from ..packed_registers import pack_registers, unpack_registers
from . import faults

if TYPE_CHECKING:
    from .host_device import HostDevice


def _c(n: int, ty: ir.Type = I32) -> ir.Constant:
    return ir.Constant(ty, n)


def _loop(b: ir.IRBuilder, count: int, body: Callable[[ir.Value], None]) -> None:
    """for (i = 0; i < count; i++) body(i), as IR blocks."""
    head = b.append_basic_block("wgmma_loop")
    step = b.append_basic_block("wgmma_body")
    done = b.append_basic_block("wgmma_done")
    before = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I32)
    i.add_incoming(_c(0), before)
    b.cbranch(b.icmp_unsigned("<", i, _c(count)), step, done)
    b.position_at_end(step)
    body(i)
    nxt = b.add(i, _c(1))
    i.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(done)


class WgmmaModels:
    def shared_address(self: "HostDevice", b: ir.IRBuilder, byte_offset: ir.Value) -> ir.Value:
        """On the host, shared addresses are offsets into the CTA's shared buffer."""
        return byte_offset

    def fence_proxy_async(self: "HostDevice", b: ir.IRBuilder) -> None:
        return None

    def wgmma_fence(self: "HostDevice", b: ir.IRBuilder) -> None:
        return None

    def wgmma_commit(self: "HostDevice", b: ir.IRBuilder) -> None:
        return None

    def wgmma_wait(self: "HostDevice", b: ir.IRBuilder, acc: list[ir.Value], pending: int = 0,
                   inputs: Sequence[ir.Value] = ()) -> list[ir.Value]:
        """A host wgmma completes at issue: nothing to wait for, no register to keep."""
        return list(acc)

    def _element_offset(self: "HostDevice", b: ir.IRBuilder, desc: ir.Value, contig: ir.Value,
                        strided: ir.Value, elem_bytes: int) -> ir.Value:
        """The shared byte offset of the element `contig` along the contiguous dimension
        and `strided` along the other, from the sub-tile's descriptor."""
        def field(shift: int) -> ir.Value:
            v = b.trunc(b.lshr(desc, _c(shift, I64)), I32)
            return b.shl(b.and_(v, _c(0x3FFF)), _c(4))
        start, lbo, sbo = field(0), field(16), field(32)
        mode = b.trunc(b.lshr(desc, _c(62, I64)), I32)
        sw = b.select(b.icmp_unsigned("==", mode, _c(1)), _c(128),
                      b.select(b.icmp_unsigned("==", mode, _c(2)), _c(64), _c(32)))
        sbits = b.select(b.icmp_unsigned("==", mode, _c(1)), _c(7),
                         b.select(b.icmp_unsigned("==", mode, _c(2)), _c(3), _c(1)))
        per_box = b.udiv(sw, _c(elem_bytes))
        addr = b.add(start, b.mul(b.udiv(contig, per_box), lbo))
        addr = b.add(addr, b.mul(b.udiv(strided, _c(8)), sbo))
        addr = b.add(addr, b.mul(b.urem(strided, _c(8)), sw))
        addr = b.add(addr, b.mul(b.urem(contig, per_box), _c(elem_bytes)))
        chunk_bits = b.and_(b.lshr(addr, _c(7)), sbits)
        return b.xor(addr, b.shl(chunk_bits, _c(4)))

    def _check_operand(self: "HostDevice", b: ir.IRBuilder, desc: ir.Value, extent: tuple[int, int],
                       elem_bytes: int) -> None:
        """Record a fault when the operand `desc` describes (`extent`: elements along its
        contiguous and its strided dimension) reaches past the CTA's shared memory: its
        first and its last element are checked, once an instruction (each 8-row group of
        a swizzled box stays within its own rows, so the last element's row is the last)."""
        for contig, strided in ((0, 0), (extent[0] - 1, extent[1] - 1)):
            off = self._element_offset(b, desc, _c(contig), _c(strided), elem_bytes)
            faults.check_in_range(b, off, elem_bytes, self.smem_bytes)

    def _load_element(self: "HostDevice", b: ir.IRBuilder, off: ir.Value, ab_type: str) -> ir.Value:
        """An operand element of shared memory as the products take it (`_widened`)."""
        ptr = b.gep(self.smem, [off], source_etype=I8)
        raw_ty = I8 if ab_type in ("e4m3", "e5m2", "s8") else I16
        return _widened(b, b.load(ptr, typ=raw_ty, align=raw_ty.width // 8), ab_type)

    def wgmma(self: "HostDevice", b: ir.IRBuilder, choice: Any, desc_a: ir.Value, desc_b: ir.Value,
              acc: list[ir.Value], trans_b: bool, trans_a: bool = False, scale_d: Any = True) -> list[ir.Value]:
        self._check_operand(b, desc_a, (64, choice.k) if trans_a else (choice.k, 64), choice.elem_bytes)

        def a_value(row: ir.Value, half: ir.Value, k: ir.Value) -> ir.Value:
            if trans_a:  # M-major A: contiguous along M
                off = self._element_offset(b, desc_a, row, k, choice.elem_bytes)
            else:
                off = self._element_offset(b, desc_a, k, row, choice.elem_bytes)
            return self._load_element(b, off, choice.ab_type)
        return self._wgmma_loops(b, choice, a_value, desc_b, _start(b, acc, scale_d), trans_b)

    def wgmma_rs(self: "HostDevice", b: ir.IRBuilder, choice: Any, a: list[ir.Value], desc_b: ir.Value,
                 acc: list[ir.Value], trans_b: bool, scale_d: Any = True) -> list[ir.Value]:
        """A from registers: the thread's rows g and g + 8 of its warp's 16 are spread
        over its quad (lanes 4(l // 4) .. +3). With 16-bit elements register j of lane t
        holds k = 2t, 2t + 1 (+ 8 for j >= 2) of row g (+ 8 for odd j); with 8-bit ones
        (k = 32) k = 4t .. 4t + 3 (+ 16 for j >= 2), the lowest byte first. Gathered
        through the exchange buffer."""
        quad = b.and_(self.lane, _c(28))

        def read() -> list[ir.Value]:
            return [self.peek(b, b.add(self.warp_base, b.add(quad, _c(t))), j) for t in range(4) for j in range(4)]
        words = self.collective(b, "warp", list(a), read)
        kk = choice.k
        per_word = 4 // choice.elem_bytes        # elements a register: 2 or 4
        row_ty = ir.ArrayType(_product_type(choice), 2 * kk)
        rows = self.entry.alloca(row_ty)
        rows.type = ptr_type(0)
        bits = 8 * choice.elem_bytes
        for half in range(2):
            for k in range(kk):
                t = (k % (kk // 2)) // per_word
                word = words[t * 4 + half + 2 * (k // (kk // 2))]
                raw = b.trunc(b.lshr(word, _c(bits * (k % per_word))), ir.IntType(bits))
                v = _widened(b, raw, choice.ab_type)
                b.store(v, b.gep(rows, [_c(0), _c(half * kk + k)], source_etype=row_ty))

        def a_value(row: ir.Value, half: ir.Value, k: ir.Value) -> ir.Value:
            idx = b.add(b.mul(half, _c(kk)), k)
            return b.load(b.gep(rows, [_c(0), idx], source_etype=row_ty), typ=row_ty.element)
        return self._wgmma_loops(b, choice, a_value, desc_b, _start(b, acc, scale_d), trans_b)

    def _wgmma_loops(self: "HostDevice", b: ir.IRBuilder, choice: Any,
                     a_value: Callable[[ir.Value, ir.Value, ir.Value], ir.Value], desc_b: ir.Value,
                     acc: list[ir.Value], trans_b: bool) -> list[ir.Value]:
        """`_wgmma_sums` on this thread's accumulator registers. An f16 accumulator
        arrives as `.f16x2` registers (pairs of consecutive elements, `packed_registers`):
        each instruction sums its products onto the f32 value of its f16 accumulator
        and rounds to f16 once at its end, as the tensor cores accumulate in f16."""
        n = choice.n_instr
        self._check_operand(b, desc_b, (n, choice.k) if trans_b else (choice.k, n), choice.elem_bytes)
        if choice.acc_type != "f16":
            return self._wgmma_sums(b, choice, a_value, desc_b, acc, trans_b)
        wide = [b.fpext(h, F32) for h in unpack_registers(b, acc, F16, 2)]
        sums = self._wgmma_sums(b, choice, a_value, desc_b, wide, trans_b)
        return pack_registers(b, [b.fptrunc(v, F16) for v in sums], 2)

    def _wgmma_sums(self: "HostDevice", b: ir.IRBuilder, choice: Any,
                    a_value: Callable[[ir.Value, ir.Value, ir.Value], ir.Value], desc_b: ir.Value,
                    acc: list[ir.Value], trans_b: bool) -> list[ir.Value]:
        """acc[i] += sum over k of A(row(i), k) * B(k, col(i)) for this thread's
        registers (f32 or i32, one element each), B read through its descriptor."""
        count = len(acc)
        size = choice.elem_bytes
        ety = _product_type(choice)
        arr = self.entry.alloca(ir.ArrayType(ety, count))
        arr.type = ptr_type(0)  # opaque, as every pointer of the module
        for i, v in enumerate(acc):
            b.store(v, b.gep(arr, [_c(0), _c(i)], source_etype=ir.ArrayType(ety, count)))
        group_row = b.mul(b.and_(self.warp, _c(3)), _c(16))
        quad_row = b.add(group_row, b.lshr(self.lane, _c(2)))
        pair_col = b.mul(b.and_(self.lane, _c(3)), _c(2))

        def per_register(r: ir.Value) -> None:
            half = b.and_(b.lshr(r, _c(1)), _c(1))
            row = b.add(quad_row, b.mul(half, _c(8)))
            col = b.add(b.add(b.mul(b.lshr(r, _c(2)), _c(8)), pair_col), b.and_(r, _c(1)))
            slot = b.gep(arr, [_c(0), r], source_etype=ir.ArrayType(ety, count))

            def per_k(k: ir.Value) -> None:
                a = a_value(row, half, k)
                if trans_b:  # N-major B: contiguous along N
                    off = self._element_offset(b, desc_b, col, k, size)
                else:
                    off = self._element_offset(b, desc_b, k, col, size)
                bv = self._load_element(b, off, choice.ab_type)
                if ety == I32:  # int8: exact products, wrapping sums
                    b.store(b.add(b.load(slot, typ=I32), b.mul(a, bv)), slot)
                else:
                    b.store(b.fadd(b.load(slot, typ=F32), b.fmul(a, bv)), slot)
            _loop(b, choice.k, per_k)

        _loop(b, count, per_register)
        return [b.load(b.gep(arr, [_c(0), _c(i)], source_etype=ir.ArrayType(ety, count)), typ=ety)
                for i in range(count)]


def _zeros(acc: list[ir.Value]) -> list[ir.Value]:
    """The accumulator a wgmma with a false scale-d predicate starts from (D = A·B):
    what `acc` held is not read."""
    return [ir.Constant(v.type, 0 if isinstance(v.type, ir.IntType) else 0.0) for v in acc]


def _start(b: ir.IRBuilder, acc: list[ir.Value], scale_d: Any) -> list[ir.Value]:
    """What a wgmma accumulates onto: `acc`, or zero where its scale-d predicate (a
    constant, or an i1 known at run time) is false."""
    if isinstance(scale_d, bool):
        return acc if scale_d else _zeros(acc)
    return [b.select(scale_d, v, z) for v, z in zip(acc, _zeros(acc))]


def _product_type(choice: Any) -> ir.Type:
    """What the model multiplies and sums in: i32 for int8 operands, else f32."""
    return I32 if choice.acc_type == "s32" else F32


def _widened(b: ir.IRBuilder, raw: ir.Value, ab_type: str) -> ir.Value:
    """An operand element's bits (i8 for e4m3/e5m2/s8, i16 for f16/bf16) as f32, or
    as i32 for s8."""
    if ab_type == "s8":
        return b.sext(raw, I32)
    if ab_type in ("e4m3", "e5m2"):
        return casts.fp8_to_f32(b, raw, "f8" + ab_type)
    if ab_type == "f16":
        return b.fpext(b.bitcast(raw, ir.HalfType()), F32)
    return b.bitcast(b.shl(b.zext(raw, I32), _c(16)), F32)
