"""The CPU lowering of loads and stores with their bounds checks, and of the located
runtime errors (a mixin of `lower.CpuLowering`).

A tile access first tries the fast path: one pass over the tile finds whether every
element is active and whether the offsets' range lies inside the pointer's buffer, then
a branch-free loop does the accesses (vectorized by LLVM). Otherwise, or for scalar and
atomic accesses, each element is checked on its own, as the interpreter does.
"""
from __future__ import annotations

from typing import Optional

import llvmlite.ir as ir

from ...ir.accessors import memory_operands
from ...ir.core import Instr, Value
from ...ir.types import PointerType, element_of, shape_of
from ..llvm.types import I8, I32, I64, constant, llvm_type, memory_type
from .tiles import ERR_EXTRA, ERR_FLAG, ERR_LIST, ERR_PID, ERR_SITE, Site, Tile, elem_bytes, numel

_bytes, _numel = elem_bytes, numel


class MemoryOps:
    """Methods of CpuLowering (see `lower.py` for `self.b`, `self.loop`, tiles)."""

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
        site = Site(kind, ins.loc, origin, str(pointee), _bytes(pointee), tuple(shape_of(ptr_v.type)))
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
        """`bad` and the address lies in none of the launch's live host arrays (pointer
        tables: a pointer loaded from memory); a runtime loop over the table the launch
        puts after the argument ranges and the no-overlap word in `sizes`."""
        self.uses_host_ranges = True
        b = self.b
        base = 2 * max(len(self.kernel.args), 1) + 2  # after the no-overlap and stream words
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
        self.fence_streams(self.streams_allowed)
        b.ret(ir.Constant(I32, 1))

    def runtime_error(self, ins: Instr, cond: ir.Value, kind: str, message: str,
                      extra: Optional[list] = None, shape: tuple = ()) -> None:
        """Stop the program with a located error when `cond` (i1) holds; `extra` values
        go to the error record."""
        b = self.b
        self.sites.append(Site(kind, ins.loc, None, message, 1, shape))
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
                do, value=None) -> None:
        """The loop of a load or store; `do(p, i)` accesses one element (a store's
        `value(i)` is the element it writes, in memory type)."""
        if kind != "atomic" and shape_of(ptr_v.type):
            self._access_tile(ins, kind, ptr_v, mask_v, fallback_v, do, value)
            return
        self._access_slow(ins, kind, ptr_v, mask_v, fallback_v, do)

    def _row_length(self, ptr_v: Value) -> int:
        """N when the axis analysis proves each row of the pointer tile (its last
        dimension, N long) to be N consecutive elements, else 1."""
        shape = tuple(shape_of(ptr_v.type))
        info = self.axis.get(ptr_v)
        if info is None or not shape or shape[-1] <= 1 or info.contiguity[-1] < shape[-1]:
            return 1
        return shape[-1]

    def _access_tile(self, ins: Instr, kind: str, ptr_v: Value, mask_v: Optional[Value],
                     fallback_v: Optional[Value], do, value=None) -> None:
        """A tile load/store with the checks hoisted: one vectorizable pass finds whether
        every element is active, one per row the offsets' range (with rows proven
        contiguous, from each row's first and last element: a row of N elements is
        [p, p + N)); then a branch-free loop does the accesses, vectors along the rows.
        Otherwise the per-element loop runs."""
        b = self.b
        n = _numel(ptr_v.type)
        origin = self.origin.get(id(ptr_v))
        need_range = self.checked
        if need_range and origin is None:
            self._access_slow(ins, kind, ptr_v, mask_v, fallback_v, do)
            return
        row = self._row_length(ptr_v)
        rows = n // row
        pointee = element_of(ptr_v.type).pointee
        mty = memory_type(pointee)
        nbytes = _bytes(pointee)
        ab = self.alloca_b
        all_slot, lo_slot, hi_slot = ab.alloca(I8), ab.alloca(I64), ab.alloca(I64)
        b.store(ir.Constant(I8, 1), all_slot)
        b.store(ir.Constant(I64, 2**63 - 1), lo_slot)
        b.store(ir.Constant(I64, -2**63), hi_slot)
        base = b.ptrtoint(self.env[id(self.kernel.args[origin])], I64) if need_range else None

        mask_ok = None
        if mask_v is not None:
            # once per mask and IR block: accesses of one block run in order, so the
            # first scan's result dominates the later ones (a load, a load, a store
            # under one mask scan it once)
            key = (id(mask_v), self.parent_block.get(id(ins)))
            mask_ok = self.mask_scans.get(key)
            if mask_ok is None:
                mask_ok = self.mask_all_true(mask_v)
                if mask_ok is not None and key[1] is not None:
                    self.mask_scans[key] = mask_ok
            if mask_ok is None:
                mask_slot = ab.alloca(I8)
                b.store(ir.Constant(I8, 1), mask_slot)

                def scan_mask(i):
                    b.store(b.and_(b.load(mask_slot), b.zext(self.get(mask_v, i), I8)), mask_slot)
                self.loop(n, scan_mask)
                mask_ok = b.icmp_unsigned("!=", b.load(mask_slot), ir.Constant(I8, 0))
                if key[1] is not None:
                    self.mask_scans[key] = mask_ok

        def scan_rows(r):
            first = b.mul(r, ir.Constant(I64, row)) if row > 1 else r
            off = b.sub(b.ptrtoint(self.get(ptr_v, first), I64), base)
            lo, hi = b.load(lo_slot), b.load(hi_slot)
            b.store(b.select(b.icmp_signed("<", off, lo), off, lo), lo_slot)
            end = off
            if row > 1:
                # the row's last element where contiguity puts it (an i32 offset that
                # wrapped inside the row does not): else the per-element path
                last = b.sub(b.ptrtoint(self.get(ptr_v, b.add(first, ir.Constant(I64, row - 1))), I64), base)
                end = b.add(off, ir.Constant(I64, (row - 1) * nbytes))
                same = b.icmp_unsigned("==", last, end)
                b.store(b.and_(b.load(all_slot), b.zext(same, I8)), all_slot)
            b.store(b.select(b.icmp_signed(">", end, hi), end, hi), hi_slot)
        if need_range:
            self.loop(rows, scan_rows)
        fast = b.icmp_unsigned("!=", b.load(all_slot), ir.Constant(I8, 0))
        if mask_ok is not None:
            fast = b.and_(fast, mask_ok)
        if need_range:
            blo, bhi = self.bounds[origin]
            inside = b.and_(b.icmp_signed(">=", b.load(lo_slot), blo),
                            b.icmp_signed("<=", b.add(b.load(hi_slot), ir.Constant(I64, nbytes)), bhi))
            fast = b.and_(fast, inside)
        if kind == "load" and rows == 1 and row > 1 and mty == llvm_type(pointee) and origin is not None \
                and origin not in self.written and not getattr(ins.attrs, "volatile", False):
            # (a volatile load reads memory where it stands: never deferred to its uses)
            self._load_zero_copy(ins, ptr_v, mask_v, fallback_v, do, fast, n)
            return
        result = self.new_tile(ins.result.type) if kind == "load" else None
        with b.if_else(fast) as (then, otherwise):
            with then:
                if row > 1 and value is not None and self.can_stream(origin, row, nbytes):
                    with b.if_else(self.stream_flag(origin)) as (stream, regular):
                        with stream:
                            self.store_rows_streaming(lambda r: self.get(ptr_v, b.mul(r, ir.Constant(I64, row))),
                                                      rows, row, mty, nbytes, value)
                        with regular:
                            self._rows_fast(ptr_v, rows, row, mty, do, result)
                elif row > 1:
                    self._rows_fast(ptr_v, rows, row, mty, do, result)
                else:
                    def plain(i):
                        v = do(self.get(ptr_v, i), i)
                        if result is not None:
                            b.store(v, self.elem_ptr(result, i))
                    self.loop(n, plain)
            with otherwise:
                self._access_slow(ins, kind, ptr_v, mask_v, fallback_v, do, into=result)
        if result is not None:
            self.env[id(ins.result)] = result

    def _rows_fast(self, ptr_v: Value, rows: int, row: int, mty: ir.Type, do, result) -> None:
        """The fast path's accesses of contiguous rows: element j of row r at p0 + j."""
        b = self.b

        def per_row(r):
            first = b.mul(r, ir.Constant(I64, row))
            p0 = self.get(ptr_v, first)

            def along(j):
                i = b.add(first, j)
                v = do(b.gep(p0, [j], source_etype=mty, inbounds=True), i)
                if result is not None:
                    b.store(v, self.elem_ptr(result, i))
            self.loop(row, along)
        self.loop(rows, per_row)

    def _load_zero_copy(self, ins: Instr, ptr_v: Value, mask_v: Optional[Value], fallback_v: Optional[Value],
                        do, fast: ir.Value, n: int) -> None:
        """A contiguous load on its fast path, from a buffer no store of the kernel
        writes, and (checked by the launch) that no written buffer overlaps: its tile is
        the argument's memory itself, read where it is used (no copy). Otherwise a stack
        buffer, filled by the per-element path; the tile's base pointer is chosen at run
        time."""
        b = self.b
        buf = self.new_tile(ins.result.type)
        generic = ir.PointerType()
        direct = b.and_(fast, self.no_overlap)
        with b.if_else(direct) as (then, otherwise):
            with then:
                p0 = b.addrspacecast(self.get(ptr_v, ir.Constant(I64, 0)), generic)
                then_bb = b.block
            with otherwise:
                with b.if_else(fast) as (copy, slow):
                    with copy:
                        src = self.get(ptr_v, ir.Constant(I64, 0))
                        self.loop(n, lambda i: b.store(do(b.gep(src, [i], source_etype=buf.elem, inbounds=True), i),
                                                       self.elem_ptr(buf, i)))
                    with slow:
                        self._access_slow(ins, "load", ptr_v, mask_v, fallback_v, do, into=buf)
                stack = b.bitcast(self.elem_ptr(buf, ir.Constant(I64, 0)), generic)
                else_bb = b.block
        base = b.phi(generic)
        base.add_incoming(p0, then_bb)
        base.add_incoming(stack, else_bb)
        self.env[id(ins.result)] = Tile(base, ins.result.type, flat=True)

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
        parts = memory_operands(ins)
        ptr_v, mask_v = parts.pointer, parts.mask
        other_v = parts.other if mask_v is not None else None  # other fills masked-off lanes only
        pointee = element_of(ptr_v.type).pointee
        mty, rty = memory_type(pointee), llvm_type(pointee)
        # a volatile load (the spin of a decoupled look-back, a flag another program
        # sets) must read memory each time it runs: a plain load in a loop that stores
        # nothing is loop-invariant to LLVM, which hoists it and spins forever. A
        # monotonic atomic load is the same instruction on the host but is never
        # hoisted, merged or deferred.
        volatile = bool(getattr(ins.attrs, "volatile", False))

        def do(p, i):
            if volatile:
                v = self.b.load_atomic(p, "monotonic", _bytes(pointee), typ=mty)
            else:
                v = self.b.load(p, typ=mty)
            return self.b.trunc(v, rty) if mty != rty else v
        self._access(ins, "load", ptr_v, mask_v, other_v, do)

    def op_store(self, ins: Instr) -> None:
        parts = memory_operands(ins)
        ptr_v, val_v, mask_v = parts.pointer, parts.value, parts.mask
        pointee = element_of(ptr_v.type).pointee
        mty, rty = memory_type(pointee), llvm_type(pointee)

        def value(i):
            v = self.get(val_v, i)
            return self.b.zext(v, mty) if mty != rty else v

        def do(p, i):
            st = self.b.store(value(i), p)
            st.set_metadata("noalias", self.input_scope)
        self._access(ins, "store", ptr_v, mask_v, None, do, value)

