"""Tile IR → LLVM IR for the host CPU: every tile value is a small stack buffer (row-major,
one element per slot) and every tile op a loop nest over buffers; scalars stay in
registers. LLVM's loop vectorizer turns the loops into SIMD code for the host.

The generated module has one entry point, `<kernel>.range(argv, sizes, start, end, nx,
ny, nz, err) -> i32`, running the programs with linear ids [start, end) of an nx×ny×nz
grid; `argv` holds one 8-byte slot per runtime argument (a pointer, or a scalar's bits),
`sizes` the byte size of each pointer argument's buffer (bounds checks), `err` an error
record (see `ERR_*`) that the first failing program fills before all stop.

Ops this lowering does not cover raise `CpuLoweringError` naming the op and the kernel
line: nothing falls back silently.
"""
from __future__ import annotations

from typing import Any, Optional

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import OP_INFO, Kind, Op
from ...ir.types import PointerType, ScalarType, element_of, shape_of
from ..llvm import host_jit
from ..llvm.scalar_ops import ScalarTarget, lower_op
from ..llvm.types import I8, I32, I64, constant, llvm_type, memory_type
from .lower_ops import MoreOps

# error record (int64 words): flag, site, pid x y z, then per kind: for an access, the
# number of bad elements, of active elements, the first bad linear index, and the byte
# offsets of the first ERR_LIST bad elements
ERR_LIST = 8
ERR_FLAG, ERR_SITE, ERR_PID, ERR_EXTRA = 0, 1, 2, 5
ERR_WORDS = ERR_EXTRA + 3 + ERR_LIST
PTR = ir.PointerType()


class CpuLoweringError(CompilationError):
    """The CPU backend cannot lower an op of the kernel."""


def _bytes(e: Any) -> int:
    return 8 if isinstance(e, PointerType) else max(e.bits // 8, 1)


def _numel(t: Any) -> int:
    n = 1
    for d in shape_of(t):
        n *= d
    return n


class Tile:
    """A tile value: a stack buffer of `numel` register-typed elements."""

    __slots__ = ("buf", "ty", "shape", "elem")

    def __init__(self, buf: ir.Value, ty: Any):
        self.buf = buf
        self.ty = ty
        self.shape = tuple(shape_of(ty))
        self.elem = llvm_type(element_of(ty))


class Site:
    """A checked memory access: what the error message needs."""

    def __init__(self, kind: str, ins: Instr, arg: Optional[int], type_name: str, elem_bytes: int,
                 shape: tuple):
        self.kind, self.ins, self.arg, self.type_name = kind, ins, arg, type_name
        self.elem_bytes, self.shape = elem_bytes, shape


class CpuLowering(MoreOps):
    def __init__(self, kernel: Kernel, checked: bool = True, debug: bool = False):
        self.kernel = kernel
        self.checked = checked
        self.debug = debug
        self.prints = any(i.op is Op.DEVICE_PRINT for i in kernel.walk())
        self.target = ScalarTarget()
        self.module = ir.Module(name=kernel.name)
        self.module.triple = host_jit.llvm_triple()
        self.env: dict[int, Any] = {}
        self.sites: list[Site] = []
        self.ptr_args = [i for i, a in enumerate(kernel.args) if isinstance(element_of(a.type), PointerType)]
        # which pointer argument each pointer value derives from (None: unknown)
        self.origin: dict[int, Optional[int]] = {}

    # ---- module structure -------------------------------------------------------------
    def build(self) -> ir.Module:
        host_jit.define_truncsfbf2(self.module)
        fnty = ir.FunctionType(I32, [PTR, PTR, I64, I64, I32, I32, I32, PTR])
        fn = ir.Function(self.module, fnty, self.kernel.name + ".range")
        argv, sizes, start, end, nx, ny, nz, err = fn.args
        self.fn, self.err = fn, err
        self.alloca_b = ir.IRBuilder(fn.append_basic_block("entry"))
        loop_head = fn.append_basic_block("programs")
        b = ir.IRBuilder(loop_head)
        self.b = b
        # arguments, loaded once
        for i, a in enumerate(self.kernel.args):
            slot = self.alloca_b.gep(argv, [ir.Constant(I64, i)], source_etype=I64)
            e = element_of(a.type)
            if isinstance(e, ScalarType) and e.is_bool:
                v = self.alloca_b.icmp_unsigned("!=", self.alloca_b.load(slot, typ=I8), ir.Constant(I8, 0))
            else:
                v = self.alloca_b.load(slot, typ=llvm_type(e))
            self.env[id(a)] = v
            if isinstance(e, PointerType):
                self.origin[id(a)] = i
        # the bytes [ptr + lo, ptr + hi) a pointer argument may reach (a view with
        # negative strides reaches below its first element)
        word = lambda k: self.alloca_b.load(self.alloca_b.gep(sizes, [ir.Constant(I64, k)],  # noqa: E731
                                                              source_etype=I64), typ=I64)
        self.bounds = {i: (word(2 * i), word(2 * i + 1)) for i in self.ptr_args}
        # after them: the count of live host arrays and their [lo, hi) addresses, for
        # pointers loaded from memory (pointer tables); filled only when
        # `uses_host_ranges` (see CpuProgram._pack)
        self.sizes_arg = sizes
        self.uses_host_ranges = False
        self.nprog = (nx, ny, nz)
        # for (lin = start; lin < end; ++lin) { pid = unravel(lin); body }
        lin_slot = self.alloca_b.alloca(I64)
        self.alloca_b.store(start, lin_slot)
        lin = b.load(lin_slot)
        more = b.icmp_signed("<", lin, end)
        body_bb = fn.append_basic_block("program")
        done_bb = fn.append_basic_block("done")
        b.cbranch(more, body_bb, done_bb)
        b.position_at_end(body_bb)
        nx64, ny64 = b.zext(nx, I64), b.zext(ny, I64)
        self.pid = (b.trunc(b.urem(lin, nx64), I32), b.trunc(b.urem(b.udiv(lin, nx64), ny64), I32),
                    b.trunc(b.udiv(lin, b.mul(nx64, ny64)), I32))
        self.next_bb = fn.append_basic_block("next")
        self.block(self.kernel.body)
        if not b.block.is_terminated:
            b.branch(self.next_bb)
        b.position_at_end(self.next_bb)
        b.store(b.add(b.load(lin_slot), ir.Constant(I64, 1)), lin_slot)
        b.branch(loop_head)
        b.position_at_end(done_bb)
        b.ret(ir.Constant(I32, 0))
        self.alloca_b.branch(loop_head)
        return self.module

    # ---- values -----------------------------------------------------------------------
    def new_tile(self, ty: Any) -> Tile:
        e = element_of(ty)
        buf = self.alloca_b.alloca(ir.ArrayType(llvm_type(e), max(_numel(ty), 1)))
        buf.align = 64
        return Tile(buf, ty)

    def elem_ptr(self, t: Tile, idx: ir.Value) -> ir.Value:
        return self.b.gep(t.buf, [ir.Constant(I64, 0), idx], inbounds=True)

    def get(self, v: Value, idx: Optional[ir.Value] = None) -> ir.Value:
        """The value of `v` (element `idx` of a tile)."""
        x = self.env[id(v)]
        if isinstance(x, Tile):
            return self.b.load(self.elem_ptr(x, idx), typ=x.elem)
        return x

    def loop(self, n: int, body) -> None:
        """for (i = 0; i < n; ++i) body(i), with i an i64."""
        b = self.b
        pre = b.block
        head = self.fn.append_basic_block("loop")
        after = self.fn.append_basic_block("loop.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), pre)
        body(i)
        nxt = b.add(i, ir.Constant(I64, 1))
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, ir.Constant(I64, n)), head, after)
        b.position_at_end(after)

    def fail(self, ins: Instr, why: str) -> CpuLoweringError:
        loc = ins.loc
        where = f"{loc.file}:{loc.line}: " if loc is not None and loc.line > 0 else ""
        return CpuLoweringError(f"{where}the CPU backend cannot lower '{ins.op.value}' "
                                f"in kernel '{self.kernel.name}': {why}")

    # ---- instructions -----------------------------------------------------------------
    def block(self, blk: Block) -> None:
        for ins in blk.instrs:
            if self.b.block.is_terminated:
                return
            self.instr(ins)

    def instr(self, ins: Instr) -> None:
        op = ins.op
        handler = getattr(self, "op_" + op.value, None)
        if handler is not None:
            handler(ins)
            return
        kind = OP_INFO[op].kind
        if kind is Kind.ELEMENTWISE:
            self.elementwise(ins)
            return
        raise self.fail(ins, "not supported by the CPU backend yet (run it with TEGULA_INTERPRET=1)")

    def scalar_or_tile(self, ins: Instr, fill) -> None:
        """Define ins.result as fill(i) for each element (or fill(None) for a scalar)."""
        r = ins.result
        if not shape_of(r.type):
            self.env[id(r)] = fill(None)
            return
        t = self.new_tile(r.type)
        self.loop(_numel(r.type), lambda i: self.b.store(fill(i), self.elem_ptr(t, i)))
        self.env[id(r)] = t

    def elementwise(self, ins: Instr) -> None:
        types = [o.type for o in ins.operands]

        def one(i):
            args = [self.get(o, i) for o in ins.operands]
            try:
                return lower_op(self.b, self.target, ins.op, ins.attrs, args, types, ins.result.type)
            except NotImplementedError as e:
                raise self.fail(ins, str(e)) from None
        self.scalar_or_tile(ins, one)
        if ins.op is Op.ADDPTR:
            self.origin[id(ins.result)] = self.origin.get(id(ins.operands[0]))
        elif ins.op is Op.SELECT and isinstance(element_of(ins.result.type), PointerType):
            a, c = self.origin.get(id(ins.operands[1])), self.origin.get(id(ins.operands[2]))
            self.origin[id(ins.result)] = a if a == c else None

    def op_constant(self, ins: Instr) -> None:
        c = constant(ins.result.type, ins.attrs.value)
        self.scalar_or_tile(ins, lambda i: c)

    def op_program_id(self, ins: Instr) -> None:
        self.env[id(ins.result)] = self.pid[ins.attrs.axis]

    def op_num_programs(self, ins: Instr) -> None:
        self.env[id(ins.result)] = self.nprog[ins.attrs.axis]

    def op_arange(self, ins: Instr) -> None:
        ty = llvm_type(element_of(ins.result.type))
        start = ins.attrs.start
        self.scalar_or_tile(ins, lambda i: self.b.trunc(self.b.add(i, ir.Constant(I64, start)), ty)
                            if ty != I64 else self.b.add(i, ir.Constant(I64, start)))

    def op_splat(self, ins: Instr) -> None:
        self.origin[id(ins.result)] = self.origin.get(id(ins.operands[0]))
        self.scalar_or_tile(ins, lambda i: self.get(ins.operands[0]))

    def _alias(self, ins: Instr) -> None:
        src = self.env[id(ins.operands[0])]
        self.origin[id(ins.result)] = self.origin.get(id(ins.operands[0]))
        if isinstance(src, Tile):
            self.env[id(ins.result)] = Tile(src.buf, ins.result.type)
        elif shape_of(ins.result.type):
            self.scalar_or_tile(ins, lambda i: src)
        else:
            self.env[id(ins.result)] = src

    def op_expand_dims(self, ins: Instr) -> None:
        self._alias(ins)

    def op_reshape(self, ins: Instr) -> None:
        # row-major order is kept (a reorder, when allowed, is the identity here)
        self._alias(ins)

    def op_broadcast(self, ins: Instr) -> None:
        src_v = ins.operands[0]
        src = self.env[id(src_v)]
        self.origin[id(ins.result)] = self.origin.get(id(src_v))
        if not isinstance(src, Tile):
            self.scalar_or_tile(ins, lambda i: src)
            return
        out_shape = tuple(shape_of(ins.result.type))
        in_shape = (1,) * (len(out_shape) - len(src.shape)) + src.shape
        # source linear index = sum over dims of (out index along d, or 0) * source stride
        strides, s = [], 1
        for d in reversed(in_shape):
            strides.append(s)
            s *= d
        strides.reverse()
        out_strides, s = [], 1
        for d in reversed(out_shape):
            out_strides.append(s)
            s *= d
        out_strides.reverse()

        def fill(i):
            b = self.b
            src_i = ir.Constant(I64, 0)
            for d, (n_in, n_out) in enumerate(zip(in_shape, out_shape)):
                if n_in == n_out and n_in > 1:
                    k = b.urem(b.udiv(i, ir.Constant(I64, out_strides[d])), ir.Constant(I64, n_out))
                    src_i = b.add(src_i, b.mul(k, ir.Constant(I64, strides[d])))
            return b.load(self.elem_ptr(src, src_i), typ=src.elem)
        self.scalar_or_tile(ins, fill)

    # ---- memory -----------------------------------------------------------------------
    # A checked access counts its active elements and collects the out-of-bounds ones
    # (the first few byte offsets, how many, the first tile index) in per-program stack
    # slots, skipping them; after the whole tile access, any bad element stops the
    # program and fills the launch's error record, so the message lists the offsets as
    # the interpreter's does.
    def _begin_checks(self, ins: Instr, kind: str, ptr_v: Value) -> Optional[dict]:
        if not self.checked:
            return None
        # the argument the pointer derives from, when the IR says; else (pointers
        # selected between buffers, or loaded from memory) any argument buffer will do
        origin = self.origin.get(id(ptr_v))
        if not hasattr(self, "bad_slots"):
            ab = self.alloca_b
            self.bad_slots = {"n": ab.alloca(I64), "active": ab.alloca(I64), "first": ab.alloca(I64),
                              "list": ab.alloca(ir.ArrayType(I64, ERR_LIST))}
        b = self.b
        b.store(ir.Constant(I64, 0), self.bad_slots["n"])
        b.store(ir.Constant(I64, 0), self.bad_slots["active"])
        pointee = element_of(ptr_v.type).pointee
        site = Site(kind, ins, origin, str(pointee), _bytes(pointee), tuple(shape_of(ptr_v.type)))
        self.sites.append(site)
        base = b.ptrtoint(self.env[id(self.kernel.args[origin])], I64) if origin is not None else None
        return {"site": len(self.sites) - 1, "origin": origin, "base": base, "nbytes": site.elem_bytes}

    def _in_bounds(self, chk: Optional[dict], p: ir.Value, i: Optional[ir.Value]) -> Optional[ir.Value]:
        """Count the element and return an i1 `in bounds` (None when unchecked); a bad
        element's offset is recorded."""
        if chk is None:
            return None
        b = self.b
        s = self.bad_slots
        b.store(b.add(b.load(s["active"]), ir.Constant(I64, 1)), s["active"])
        addr = b.ptrtoint(p, I64)
        end = ir.Constant(I64, chk["nbytes"])
        if chk["origin"] is not None:
            off = b.sub(addr, chk["base"])
            lo, hi = self.bounds[chk["origin"]]
            bad = b.or_(b.icmp_signed("<", off, lo), b.icmp_signed(">", b.add(off, end), hi))
        else:
            off = addr  # the message shows addresses
            bad = ir.Constant(ir.IntType(1), 1)
            for k in self.ptr_args:
                o = b.sub(addr, b.ptrtoint(self.env[id(self.kernel.args[k])], I64))
                lo, hi = self.bounds[k]
                inside = b.and_(b.icmp_signed(">=", o, lo), b.icmp_signed("<=", b.add(o, end), hi))
                bad = b.and_(bad, b.not_(inside))
            bad = self._outside_host_arrays(bad, addr, end)
        with b.if_then(bad, likely=False):
            n = b.load(s["n"])
            with b.if_then(b.icmp_signed("<", n, ir.Constant(I64, ERR_LIST))):
                b.store(off, b.gep(s["list"], [ir.Constant(I64, 0), n], inbounds=True))
            with b.if_then(b.icmp_signed("==", n, ir.Constant(I64, 0))):
                b.store(i if i is not None else ir.Constant(I64, 0), s["first"])
            b.store(b.add(n, ir.Constant(I64, 1)), s["n"])
        return b.not_(bad)

    def _outside_host_arrays(self, bad: ir.Value, addr: ir.Value, end: ir.Value) -> ir.Value:
        """`bad` and the address lies in none of the launch's live host arrays (a
        runtime loop over the table after the argument bounds in `sizes`)."""
        self.uses_host_ranges = True
        b = self.b
        base = 2 * max(len(self.kernel.args), 1)
        word = lambda k: b.load(b.gep(self.sizes_arg, [k], source_etype=I64), typ=I64)  # noqa: E731
        slot = self.alloca_b.alloca(ir.IntType(1))
        b.store(bad, slot)
        count = word(ir.Constant(I64, base))
        pre = b.block
        head, body, after = (self.fn.append_basic_block(n) for n in ("host.loop", "host.body", "host.end"))
        b.cbranch(b.and_(bad, b.icmp_signed(">", count, ir.Constant(I64, 0))), head, after)
        b.position_at_end(head)
        j = b.phi(I64)
        j.add_incoming(ir.Constant(I64, 0), pre)
        b.branch(body)
        b.position_at_end(body)
        k = b.add(ir.Constant(I64, base + 1), b.mul(j, ir.Constant(I64, 2)))
        lo, hi = word(k), word(b.add(k, ir.Constant(I64, 1)))
        inside = b.and_(b.icmp_signed(">=", addr, lo), b.icmp_signed("<=", b.add(addr, end), hi))
        b.store(b.and_(b.load(slot), b.not_(inside)), slot)
        nxt = b.add(j, ir.Constant(I64, 1))
        j.add_incoming(nxt, body)
        b.cbranch(b.and_(b.load(slot), b.icmp_signed("<", nxt, count)), head, after)
        b.position_at_end(after)
        return b.load(slot)

    def _end_checks(self, chk: Optional[dict]) -> None:
        if chk is None:
            return
        b = self.b
        s = self.bad_slots
        n = b.load(s["n"])
        fail_bb = self.fn.append_basic_block("oob")
        ok_bb = self.fn.append_basic_block("ok")
        b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), fail_bb, ok_bb)
        b.position_at_end(fail_bb)
        extra = [n, b.load(s["active"]), b.load(s["first"])]
        extra += [b.load(b.gep(s["list"], [ir.Constant(I64, 0), ir.Constant(I64, k)], inbounds=True))
                  for k in range(ERR_LIST)]
        self.record_error(chk["site"], extra)
        b.position_at_end(ok_bb)

    def record_error(self, site: int, extra: list) -> None:
        """Fill the error record (first error wins) and return 1 from the entry."""
        b = self.b
        word = lambda k: b.gep(self.err, [ir.Constant(I64, k)], source_etype=I64)  # noqa: E731
        old = b.cmpxchg(word(ERR_FLAG), ir.Constant(I64, 0), ir.Constant(I64, 1), "seq_cst", "seq_cst")
        first = b.extract_value(old, 1)
        with b.if_then(first):
            b.store(ir.Constant(I64, site), word(ERR_SITE))
            for k in range(3):
                b.store(b.zext(self.pid[k], I64), word(ERR_PID + k))
            for k, v in enumerate(extra):
                b.store(v, word(ERR_EXTRA + k))
        b.ret(ir.Constant(I32, 1))

    def runtime_error(self, ins: Instr, cond: ir.Value, kind: str, message: str,
                      extra: Optional[list] = None, shape: tuple = ()) -> None:
        """Stop the program with a located error when `cond` (i1) holds; `extra` values
        go to the error record."""
        b = self.b
        self.sites.append(Site(kind, ins, None, message, 1, shape))
        fail_bb = self.fn.append_basic_block("error")
        ok_bb = self.fn.append_basic_block("ok")
        b.cbranch(cond, fail_bb, ok_bb)
        b.position_at_end(fail_bb)
        self.record_error(len(self.sites) - 1, list(extra or []))
        b.position_at_end(ok_bb)

    def _guarded(self, active: Optional[ir.Value], access, fallback: Optional[ir.Value]) -> Optional[ir.Value]:
        """access() when `active` (or unconditionally when None); a load's value is
        `fallback` where not active."""
        if active is None:
            return access()
        b = self.b
        pre = b.block
        yes = self.fn.append_basic_block("acc")
        join = self.fn.append_basic_block("acc.join")
        b.cbranch(active, yes, join)
        b.position_at_end(yes)
        v = access()
        yes_end = b.block
        b.branch(join)
        b.position_at_end(join)
        if fallback is None:
            return None
        phi = b.phi(fallback.type)
        phi.add_incoming(v, yes_end)
        phi.add_incoming(fallback, pre)
        return phi

    def _access(self, ins: Instr, kind: str, ptr_v: Value, mask_v: Optional[Value], fallback_v: Optional[Value],
                do) -> None:
        """The loop of a load or store; `do(p, i)` accesses one element."""
        if kind != "atomic" and shape_of(ptr_v.type):
            self._access_tile(ins, kind, ptr_v, mask_v, fallback_v, do)
            return
        self._access_slow(ins, kind, ptr_v, mask_v, fallback_v, do)

    def _access_tile(self, ins: Instr, kind: str, ptr_v: Value, mask_v: Optional[Value],
                     fallback_v: Optional[Value], do) -> None:
        """A tile load/store with the checks hoisted: one vectorizable pass finds whether
        every element is active and the offsets' range lies inside the buffer; then a
        branch-free loop does the accesses. Otherwise the per-element loop runs."""
        b = self.b
        n = _numel(ptr_v.type)
        origin = self.origin.get(id(ptr_v))
        need_range = self.checked
        if need_range and origin is None:
            self._access_slow(ins, kind, ptr_v, mask_v, fallback_v, do)
            return
        ab = self.alloca_b
        all_slot, lo_slot, hi_slot = ab.alloca(I8), ab.alloca(I64), ab.alloca(I64)
        b.store(ir.Constant(I8, 1), all_slot)
        b.store(ir.Constant(I64, 2**63 - 1), lo_slot)
        b.store(ir.Constant(I64, -2**63), hi_slot)
        base = b.ptrtoint(self.env[id(self.kernel.args[origin])], I64) if need_range else None

        def scan(i):
            if mask_v is not None:
                b.store(b.and_(b.load(all_slot), b.zext(self.get(mask_v, i), I8)), all_slot)
            if need_range:
                off = b.sub(b.ptrtoint(self.get(ptr_v, i), I64), base)
                lo, hi = b.load(lo_slot), b.load(hi_slot)
                b.store(b.select(b.icmp_signed("<", off, lo), off, lo), lo_slot)
                b.store(b.select(b.icmp_signed(">", off, hi), off, hi), hi_slot)
        if mask_v is not None or need_range:
            self.loop(n, scan)
        fast = b.icmp_unsigned("!=", b.load(all_slot), ir.Constant(I8, 0))
        if need_range:
            blo, bhi = self.bounds[origin]
            nbytes = _bytes(element_of(ptr_v.type).pointee)
            inside = b.and_(b.icmp_signed(">=", b.load(lo_slot), blo),
                            b.icmp_signed("<=", b.add(b.load(hi_slot), ir.Constant(I64, nbytes)), bhi))
            fast = b.and_(fast, inside)
        result = self.new_tile(ins.result.type) if kind == "load" else None
        with b.if_else(fast) as (then, otherwise):
            with then:
                def plain(i):
                    v = do(self.get(ptr_v, i), i)
                    if result is not None:
                        b.store(v, self.elem_ptr(result, i))
                self.loop(n, plain)
            with otherwise:
                self._access_slow(ins, kind, ptr_v, mask_v, fallback_v, do, into=result)
        if result is not None:
            self.env[id(ins.result)] = result

    def _access_slow(self, ins: Instr, kind: str, ptr_v: Value, mask_v: Optional[Value],
                     fallback_v: Optional[Value], do, into: Optional["Tile"] = None) -> None:
        pointee = element_of(ptr_v.type).pointee
        rty = llvm_type(pointee)
        chk = self._begin_checks(ins, kind, ptr_v)
        is_load = kind in ("load", "atomic")  # both give a value per element

        def one(i):
            p = self.get(ptr_v, i)
            if is_load:
                zero = constant(pointee, 0) if not isinstance(pointee, PointerType) else ir.Constant(rty, None)
                fallback = self.get(fallback_v, i) if fallback_v is not None else zero
            else:
                fallback = None
            m = self.get(mask_v, i) if mask_v is not None else None

            def checked():
                ok = self._in_bounds(chk, p, i)
                return self._guarded(ok, lambda: do(p, i), fallback)
            return self._guarded(m, checked, fallback)
        if into is not None:
            self.loop(_numel(ptr_v.type), lambda i: self.b.store(one(i), self.elem_ptr(into, i)))
            self.env[id(ins.result)] = into
        elif is_load and ins.results:
            self.scalar_or_tile(ins, one)
        elif not shape_of(ptr_v.type):
            one(None)
        else:
            self.loop(_numel(ptr_v.type), one)
        self._end_checks(chk)

    def op_load(self, ins: Instr) -> None:
        attrs = ins.attrs
        ptr_v = ins.operands[0]
        mask_v = ins.operands[1] if attrs and attrs.has_mask else None
        other_v = ins.operands[2] if attrs and attrs.has_other else None
        pointee = element_of(ptr_v.type).pointee
        mty, rty = memory_type(pointee), llvm_type(pointee)

        def do(p, i):
            v = self.b.load(p, typ=mty)
            return self.b.trunc(v, rty) if mty != rty else v
        self._access(ins, "load", ptr_v, mask_v, other_v, do)

    def op_store(self, ins: Instr) -> None:
        attrs = ins.attrs
        ptr_v, val_v = ins.operands[0], ins.operands[1]
        mask_v = ins.operands[2] if attrs and attrs.has_mask else None
        pointee = element_of(ptr_v.type).pointee
        mty, rty = memory_type(pointee), llvm_type(pointee)

        def do(p, i):
            v = self.get(val_v, i)
            self.b.store(self.b.zext(v, mty) if mty != rty else v, p)
        self._access(ins, "store", ptr_v, mask_v, None, do)

    # ---- reductions -------------------------------------------------------------------
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

    def op_reduce(self, ins: Instr) -> None:
        """A tree over the axis pairing adjacent elements, level by level, as the
        interpreter does (so float results round identically)."""
        axis = ins.attrs.axis
        srcs = [self.env[id(o)] for o in ins.operands]
        shape = tuple(shape_of(ins.operands[0].type))
        n = shape[axis]
        outer = 1
        for d in shape[:axis]:
            outer *= d
        inner = 1
        for d in shape[axis + 1:]:
            inner *= d
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
                    for s, t in zip(srcs, scratch):
                        b.store(b.load(self.elem_ptr(s, idx), typ=s.elem), at(t, j))
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

    # ---- control flow -----------------------------------------------------------------
    def _slots(self, values: list[Value]) -> list:
        """Storage for carried / result values: a tile buffer or a scalar stack slot."""
        return [self.new_tile(v.type) if shape_of(v.type) else self.alloca_b.alloca(llvm_type(element_of(v.type)))
                for v in values]

    def _assign(self, slots: list, values: list[Value]) -> None:
        """slots := values, reading all values first (a yield may permute the carried ones)."""
        b = self.b
        temps = []
        for s, v in zip(slots, values):
            x = self.env[id(v)]
            if isinstance(s, Tile):
                t = self.new_tile(v.type)
                self.loop(_numel(v.type), lambda i, t=t, v=v: b.store(self.get(v, i), self.elem_ptr(t, i)))
                temps.append(t)
            else:
                temps.append(x)
        for s, t, v in zip(slots, temps, values):
            if isinstance(s, Tile):
                self.loop(_numel(v.type), lambda i, s=s, t=t: b.store(b.load(self.elem_ptr(t, i), typ=t.elem),
                                                                   self.elem_ptr(s, i)))
            else:
                b.store(t, s)

    def _bind(self, values: list[Value], slots: list) -> None:
        for v, s in zip(values, slots):
            self.env[id(v)] = Tile(s.buf, v.type) if isinstance(s, Tile) else self.b.load(s)

    def _origins(self, dst: list[Value], src: list[Value]) -> None:
        for d, s in zip(dst, src):
            self.origin[id(d)] = self.origin.get(id(s))

    def op_for(self, ins: Instr) -> None:
        b = self.b
        lb, ub, st = (self.get(o) for o in ins.operands[:3])
        inits = ins.operands[3:]
        body = ins.regions[0]
        iv, carried = body.args[0], body.args[1:]
        self._origins(carried, inits)
        self._origins(ins.results, inits)
        slots = self._slots(list(inits))
        self._assign(slots, list(inits))
        self.runtime_error(ins, b.icmp_signed("==", st, ir.Constant(st.type, 0)), "runtime",
                           "for loop with a step of 0")
        iv_slot = self.alloca_b.alloca(lb.type)
        b.store(lb, iv_slot)
        head = self.fn.append_basic_block("for")
        body_bb = self.fn.append_basic_block("for.body")
        after = self.fn.append_basic_block("for.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.load(iv_slot)
        signed = element_of(ins.operands[0].type).is_signed
        cmp = b.icmp_signed if signed else b.icmp_unsigned
        # Python range semantics for either sign of the step
        up = cmp(">", st, ir.Constant(st.type, 0))
        go = b.select(up, cmp("<", i, ub), cmp(">", i, ub))
        b.cbranch(go, body_bb, after)
        b.position_at_end(body_bb)
        self.env[id(iv)] = i
        self._bind(carried, slots)
        for x in body.instrs:
            if b.block.is_terminated:
                break
            if x.op is Op.YIELD:
                self._assign(slots, x.operands)
                continue
            self.instr(x)
        if not b.block.is_terminated:
            b.store(b.add(b.load(iv_slot), st), iv_slot)
            b.branch(head)
        b.position_at_end(after)
        self._bind(ins.results, slots)

    def op_if(self, ins: Instr) -> None:
        b = self.b
        cond = self.get(ins.operands[0])
        slots = self._slots(list(ins.results))
        then_bb = self.fn.append_basic_block("then")
        else_bb = self.fn.append_basic_block("else")
        after = self.fn.append_basic_block("endif")
        b.cbranch(cond, then_bb, else_bb)
        yields = []
        for bb, region in zip((then_bb, else_bb), list(ins.regions) + [None]):
            b.position_at_end(bb)
            if region is not None:
                for x in region.instrs:
                    if b.block.is_terminated:
                        break
                    if x.op is Op.YIELD:
                        self._assign(slots, x.operands)
                        yields.append(x.operands)
                        continue
                    self.instr(x)
            if not b.block.is_terminated:
                b.branch(after)
        b.position_at_end(after)
        for k, r in enumerate(ins.results):
            origins = {self.origin.get(id(y[k])) for y in yields}
            self.origin[id(r)] = origins.pop() if len(origins) == 1 else None
        self._bind(ins.results, slots)

    def op_return(self, ins: Instr) -> None:
        self.b.branch(self.next_bb)

    def op_yield(self, ins: Instr) -> None:
        raise self.fail(ins, "yield outside a region the CPU backend handles")

    def op_assume(self, ins: Instr) -> None:
        # a fact for the optimizer; debug mode checks it as the interpreter does
        if self.debug:
            self.runtime_error(ins, self.b.not_(self.get(ins.operands[0])), "assert",
                               "assumption violated (tl.assume)")

    def op_hint(self, ins: Instr) -> None:
        self._alias(ins)

    def op_debug_barrier(self, ins: Instr) -> None:
        pass  # one program runs on one thread: there is nothing to wait for

    def op_gdc_wait(self, ins: Instr) -> None:
        pass  # a launch starts after the previous one has completed

    def op_gdc_launch_dependents(self, ins: Instr) -> None:
        pass


def lower(kernel: Kernel, checked: bool = True, debug: bool = False) -> tuple[ir.Module, CpuLowering]:
    """The LLVM module of `kernel` and its lowering (whose `sites` describe the errors)."""
    lw = CpuLowering(kernel, checked, debug)
    return lw.build(), lw


__all__ = ["CpuLowering", "CpuLoweringError", "lower", "ERR_WORDS", "ERR_LIST", "Site"]
