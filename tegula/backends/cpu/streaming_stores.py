"""Streaming (non-temporal) stores on the fast path of contiguous store rows (a mixin of
`lower.CpuLowering`).

A store whose rows the axis analysis proves contiguous writes whole cache lines. When
the launch finds the written buffer larger than the private caches of the threads
that run it (a bit per argument in the stream word of `sizes`, set by
`CpuProgram._pack`), each row is computed block by block into an L1-resident stack
buffer, and the block is copied out with non-temporal 64-byte stores from the
destination's first 64-byte boundary on (the partial lines at either end by a plain
copy). A regular store first reads the line it writes (read for ownership) and keeps it
in cache, evicting the inputs; a non-temporal one sends the full line to memory.
Measured on the 2-core Xeon VM (docs/performance.md): copying 16 MiB 1.3 -> 0.93 ms,
64 MiB 10.5 -> 5.4 ms on one thread; below ~2 MiB (one core's L2) regular stores win,
hence the launch's size test.

Non-temporal stores are weakly ordered: the entry point fences before it returns, and a
kernel with atomics (the one way its programs may talk to each other during a launch)
never streams.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...ir.ops import Op
from ..llvm.types import I64

LINE = 64                # bytes a non-temporal store writes at once (a cache line)
_BLOCK_BYTES = 4096      # the stack buffer a row is computed into, block by block
_MIN_ROW_BYTES = 512     # shorter rows: the partial lines at the ends would dominate
STREAM_ARGS = 63         # arguments 0..62 have a bit in the stream word


class StreamingStores:
    """Methods of CpuLowering (see `lower.py` for `self.b`, `self.loop`, `self.stream_word`)."""

    def _init_streaming(self) -> None:
        self.streams_allowed = not any(i.op in (Op.ATOMIC_RMW, Op.ATOMIC_CAS) for i in self.kernel.walk())
        self.streams_used = False

    def can_stream(self, origin, row: int, nbytes: int) -> bool:
        """Whether a store with contiguous rows of `row` elements of `nbytes` bytes into
        argument `origin` gets a streaming variant of its fast path."""
        return (self.streams_allowed and origin is not None and origin < STREAM_ARGS
                and row * nbytes >= _MIN_ROW_BYTES)

    def stream_flag(self, origin: int) -> ir.Value:
        """i1: the launch asks argument `origin`'s stores to stream."""
        b = self.b
        bit = b.and_(b.lshr(self.stream_word, ir.Constant(I64, origin)), ir.Constant(I64, 1))
        return b.icmp_unsigned("!=", bit, ir.Constant(I64, 0))

    def store_rows_streaming(self, row_start, rows: int, row: int, mty: ir.Type, nbytes: int, value) -> None:
        """Store `rows` rows of `row` elements: row r at `row_start(r)` (a pointer to its
        first element), element i of the tile being `value(i)` (of memory type `mty`)."""
        self.streams_used = True
        b = self.b
        block = max(1, min(row, _BLOCK_BYTES // nbytes))  # both powers of two: block divides row
        buf = self.alloca_b.alloca(ir.ArrayType(mty, block))
        buf.align = LINE

        def per_row(r):
            first = b.mul(r, ir.Constant(I64, row))
            p0 = row_start(r)

            def per_block(k):
                start = b.mul(k, ir.Constant(I64, block))
                base = b.add(first, start)
                self.loop(block, lambda j: b.store(value(b.add(base, j)),
                                                   b.gep(buf, [ir.Constant(I64, 0), j], inbounds=True)))
                dst = b.gep(p0, [start], source_etype=mty, inbounds=True)
                self._stream_copy(dst, b.gep(buf, [ir.Constant(I64, 0), ir.Constant(I64, 0)], inbounds=True),
                                  block * nbytes)
            self.loop(row // block, per_block)
        self.loop(rows, per_row)

    def _stream_copy(self, dst: ir.Value, src: ir.Value, nb: int) -> None:
        """Copy `nb` bytes from the stack buffer `src` to `dst`: whole aligned lines with
        non-temporal stores, the bytes before the first and after the last by memcpy."""
        b = self.b
        i8 = ir.IntType(8)
        line_t = ir.VectorType(i8, LINE)
        total = ir.Constant(I64, nb)
        addr = b.ptrtoint(dst, I64)
        head = b.and_(b.sub(ir.Constant(I64, 0), addr), ir.Constant(I64, LINE - 1))
        head = b.select(b.icmp_unsigned("<", head, total), head, total)
        self._memcpy(dst, src, head)
        lines = b.lshr(b.sub(total, head), ir.Constant(I64, 6))
        # for (k = 0; k < lines; ++k): a run-time count
        pre = b.block
        loop_bb, body_bb, end_bb = (self.fn.append_basic_block(n) for n in ("nt.loop", "nt.body", "nt.end"))
        b.branch(loop_bb)
        b.position_at_end(loop_bb)
        k = b.phi(I64)
        k.add_incoming(ir.Constant(I64, 0), pre)
        b.cbranch(b.icmp_unsigned("<", k, lines), body_bb, end_bb)
        b.position_at_end(body_bb)
        off = b.add(head, b.shl(k, ir.Constant(I64, 6)))
        v = b.load(b.gep(src, [off], source_etype=i8, inbounds=True), typ=line_t)
        v.align = 1
        st = b.store(v, b.gep(dst, [off], source_etype=i8, inbounds=True))
        st.align = LINE
        st.set_metadata("nontemporal", self.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        k.add_incoming(b.add(k, ir.Constant(I64, 1)), body_bb)
        b.branch(loop_bb)
        b.position_at_end(end_bb)
        done = b.add(head, b.shl(lines, ir.Constant(I64, 6)))
        self._memcpy(b.gep(dst, [done], source_etype=i8, inbounds=True),
                     b.gep(src, [done], source_etype=i8, inbounds=True), b.sub(total, done))

    def _memcpy(self, dst: ir.Value, src: ir.Value, n: ir.Value) -> None:
        fn = self.module.declare_intrinsic("llvm.memcpy", [dst.type, src.type, I64])
        self.b.call(fn, [dst, src, n, ir.Constant(ir.IntType(1), 0)])

    def fence_streams(self, used: bool) -> None:
        """Before the entry point returns: order the non-temporal stores before whatever
        tells other threads that the programs are done."""
        if not used:
            return
        if self.module.triple.startswith(("x86_64", "i686", "i386")):
            # LLVM's seq_cst fence on x86 is a locked add, which Linux's barriers trust
            # for cacheable memory only; sfence is the one documented for these stores
            fn = self.module.globals.get("llvm.x86.sse.sfence") or ir.Function(
                self.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence")
            self.b.call(fn, [])
        else:
            self.b.fence("seq_cst")
