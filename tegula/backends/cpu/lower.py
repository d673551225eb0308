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
from ...passes import written_arguments
from ...passes.axis_analysis import axis_info
from ..llvm import host_clock, host_jit
from ..llvm.scalar_ops import lower_op
from ..llvm.types import I8, I32, I64, constant, llvm_type
from .lower_control import ControlFlow
from .lower_dot import DotOps
from .lower_gather import GatherOps
from .lower_memory import MemoryOps
from .lower_ops import MoreOps
from .lower_reduce import ReduceOps
from .mask_facts import MaskFacts
from .pending_values import PendingValues
from .streaming_stores import StreamingStores
from .tiles import ERR_LIST, ERR_WORDS, PTR, Lazy, Site, Tile, numel
from .vector_math import CpuScalarTarget

_numel = numel


# elementwise ops fused into their users however often those read them: recomputing one
# costs about what a load from a buffer would (up to _FUSED_OPS of them in a row, below)
_CHEAP = frozenset({Op.NEG, Op.NOT, Op.ABS, Op.ADD, Op.SUB, Op.MUL, Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR,
                    Op.MAXIMUM, Op.MINIMUM, Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.ADDPTR, Op.FMA,
                    Op.SELECT, Op.CAST, Op.BITCAST, Op.PTR_TO_INT, Op.INT_TO_PTR, Op.CEIL, Op.FLOOR})

# A chain of cheap ops fused into every user is recomputed by each: past this many ops
# (`Lazy.cost`, counting a shared operand once per reader) a value with several users is
# stored once instead (`elementwise`). Inductor's bitonic sort (`sort_with_index`) reads
# each stage's swap condition (~30 cheap ops) twice and each stage's values in the
# next: fused all the way, 256 values lowered to 87k element ops, a 276k-line module and
# 38 s of LLVM; 8.8 s for the whole compile with this limit.
_FUSED_OPS = 24


def _single_uses(body: Block) -> dict[int, bool]:
    """id(value) -> True for the results (and block arguments) used exactly once, by an
    instruction of the block that defines them (not from a nested loop body, which
    would recompute them)."""
    count: dict[int, int] = {}
    here: dict[int, bool] = {}

    def walk(blk: Block) -> None:
        defined = {id(a) for a in blk.args} | {id(r) for ins in blk.instrs for r in ins.results}
        for ins in blk.instrs:
            for o in ins.operands:
                count[id(o)] = count.get(id(o), 0) + 1
                here[id(o)] = id(o) in defined
            for region in ins.regions:
                walk(region)
    walk(body)
    return {k: here[k] for k, n in count.items() if n == 1 and here[k]}


class CpuLoweringError(CompilationError):
    """The CPU backend cannot lower an op of the kernel."""


class CpuLowering(MemoryOps, ReduceOps, DotOps, MoreOps, GatherOps, ControlFlow, MaskFacts, PendingValues,
                  StreamingStores):
    def __init__(self, kernel: Kernel, checked: bool = True, debug: bool = False):
        self.kernel = kernel
        self.checked = checked
        self.debug = debug
        self.prints = any(i.op is Op.DEVICE_PRINT for i in kernel.walk())
        self.target = CpuScalarTarget()
        self.module = ir.Module(name=kernel.name)
        self.module.triple = host_jit.llvm_triple()
        self.env: dict[int, Any] = {}
        self.sites: list[Site] = []
        self.ptr_args = [i for i, a in enumerate(kernel.args) if isinstance(element_of(a.type), PointerType)]
        # which pointer argument each pointer value derives from (None: unknown)
        self.origin: dict[int, Optional[int]] = {}
        self.memo: dict[tuple, tuple] = {}
        # zero-copy loads read buffers no store of the kernel writes and that the
        # launch found apart from every written one: their reads and the stores are
        # in disjoint alias scopes (so LLVM vectorizes loops that do both unchecked)
        domain = self.module.add_metadata([ir.MetaDataString(self.module, "tegula.cpu.domain")])
        scope = self.module.add_metadata([ir.MetaDataString(self.module, "tegula.cpu.inputs"), domain])
        self.input_scope = self.module.add_metadata([scope])
        self.single_use = _single_uses(kernel.body)
        self.parent_block = {id(ins): id(blk) for blk in kernel.body.blocks() for ins in blk.instrs}
        self.mask_scans: dict[tuple, ir.Value] = {}
        # expensive multi-use elementwise results not stored yet (see `Lazy.pending`)
        self.pending: dict[int, Value] = {}
        self.axis = axis_info(kernel)
        names = list(kernel.arg_names)
        self.written = sorted(names.index(n) for n in written_arguments(kernel) if n in names)
        self._init_streaming()

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
        # after the ranges: 1 when no written buffer overlaps another argument's (the
        # launch checks; zero-copy loads need it)
        # then the stream word: bit k set when argument k's stores should stream
        # (`streaming_stores`); then the count of live host arrays and their [lo, hi)
        # addresses, for pointers loaded from memory (pointer tables); filled only when
        # `uses_host_ranges` (see CpuProgram._pack)
        self.sizes_arg = sizes
        self.uses_host_ranges = False
        self.no_overlap = self.alloca_b.icmp_signed("!=", word(2 * max(len(self.kernel.args), 1)),
                                                    ir.Constant(I64, 0))
        self.stream_word = word(2 * max(len(self.kernel.args), 1) + 1)
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
        self.fence_streams(self.streams_used)
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
        if t.flat:
            return self.b.gep(t.buf, [idx], source_etype=t.elem, inbounds=True)
        return self.b.gep(t.buf, [ir.Constant(I64, 0), idx], inbounds=True)

    def get(self, v: Value, idx: Optional[ir.Value] = None) -> ir.Value:
        """The value of `v` (element `idx` of a tile)."""
        x = self.env[id(v)]
        if isinstance(x, Tile):
            out = self.b.load(self.elem_ptr(x, idx), typ=x.elem)
            if x.flat:
                out.set_metadata("alias.scope", self.input_scope)
            return out
        if isinstance(x, Lazy):
            # one emission per element index and basic block: a value used twice in a
            # fused expression (a DAG) is computed once there, and a value emitted in
            # one block is never used from another it may not dominate
            key = (id(v), id(idx))
            hit = self.memo.get(key)
            if hit is not None and hit[0] is self.b.block:
                return hit[1]
            out = x.fn(idx)
            self.memo[key] = (self.b.block, out, idx)
            return out
        return x

    def tile(self, v: Value) -> Any:
        """`v` as a stack buffer (a fused value is computed into a fresh one; a scalar is
        returned as it is)."""
        x = self.env[id(v)]
        if isinstance(x, Lazy):
            t = self.new_tile(v.type)
            self.loop(_numel(v.type), lambda i: self.b.store(self.get(v, i), self.elem_ptr(t, i)))
            return t
        return x

    def settle(self, v: Value) -> None:
        """Materialize `v` in place when it is an expensive fused value (before a use
        that reads each element many times)."""
        x = self.env.get(id(v))
        if isinstance(x, Lazy) and not x.cheap:
            self.env[id(v)] = self.tile(v)

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
        if self.pending:
            self._flush_pending(ins)
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

    def fused(self, ins: Instr, fill, cheap: bool = True, cost: int = 1) -> None:
        """Define ins.result as fill(i), computed where each element is used (a scalar:
        fill(None), now); `cost`: the ops that recomputes."""
        r = ins.result
        if not shape_of(r.type):
            self.env[id(r)] = fill(None)
            return
        self.env[id(r)] = Lazy(fill, r.type, cheap, cost=cost)

    def fused_cost(self, v: Value) -> int:
        """The ops an element of `v` costs where it is read (0: stored or a scalar)."""
        x = self.env.get(id(v))
        return x.cost if isinstance(x, Lazy) else 0

    def _fusible(self, ins: Instr) -> Optional[bool]:
        """Whether an elementwise result is fused into its users: True (cheap: always),
        False (expensive, but used once in the same block: fused, never recomputed),
        None (computed into a buffer)."""
        if ins.op in _CHEAP:
            return True
        if self.single_use.get(id(ins.result)):
            return False
        return None

    def elementwise(self, ins: Instr) -> None:
        types = [o.type for o in ins.operands]

        def one(i):
            args = [self.get(o, i) for o in ins.operands]
            try:
                return lower_op(self.b, self.target, ins.op, ins.attrs, args, types, ins.result.type)
            except NotImplementedError as e:
                raise self.fail(ins, str(e)) from None
        how = self._fusible(ins)
        cost = 1 + sum(self.fused_cost(o) for o in ins.operands)
        if how and cost > _FUSED_OPS and not self.single_use.get(id(ins.result)):
            how = None  # a long chain that several users would each recompute: stored once
        if how is None and shape_of(ins.result.type):
            # stored by its first user (a reduction fuses it into its own loop)
            self.env[id(ins.result)] = Lazy(one, ins.result.type, cheap=False, pending=True)
            self.pending[id(ins.result)] = ins.result
        else:
            self.fused(ins, one, bool(how), cost)
        if ins.op is Op.ADDPTR:
            self.origin[id(ins.result)] = self.origin.get(id(ins.operands[0]))
        elif ins.op is Op.SELECT and isinstance(element_of(ins.result.type), PointerType):
            a, c = self.origin.get(id(ins.operands[1])), self.origin.get(id(ins.operands[2]))
            self.origin[id(ins.result)] = a if a == c else None

    def op_constant(self, ins: Instr) -> None:
        c = constant(ins.result.type, ins.attrs.value)
        self.fused(ins, lambda i: c)

    def op_program_id(self, ins: Instr) -> None:
        self.env[id(ins.result)] = self.pid[ins.attrs.axis]

    def op_num_programs(self, ins: Instr) -> None:
        self.env[id(ins.result)] = self.nprog[ins.attrs.axis]

    def op_smid(self, ins: Instr) -> None:
        # programs run on host threads, not multiprocessors: 0, as the interpreter says
        self.env[id(ins.result)] = ir.Constant(I32, 0)

    def op_globaltimer(self, ins: Instr) -> None:
        self.env[id(ins.result)] = host_clock.monotonic_ns(self.b, self.alloca_b)

    def op_arange(self, ins: Instr) -> None:
        ty = llvm_type(element_of(ins.result.type))
        start = ins.attrs.start
        self.fused(ins, lambda i: self.b.trunc(self.b.add(i, ir.Constant(I64, start)), ty)
                   if ty != I64 else self.b.add(i, ir.Constant(I64, start)))

    def op_splat(self, ins: Instr) -> None:
        self.origin[id(ins.result)] = self.origin.get(id(ins.operands[0]))
        self.fused(ins, lambda i: self.get(ins.operands[0]))

    def _alias(self, ins: Instr) -> None:
        src = self.env[id(ins.operands[0])]
        self.origin[id(ins.result)] = self.origin.get(id(ins.operands[0]))
        if isinstance(src, Tile):
            self.env[id(ins.result)] = Tile(src.buf, ins.result.type, src.flat)
        elif isinstance(src, Lazy):
            # the same elements in the same row-major order
            self.env[id(ins.result)] = Lazy(src.fn, ins.result.type, src.cheap, cost=src.cost)
        elif shape_of(ins.result.type):
            self.fused(ins, lambda i: src)
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
        if not isinstance(src, (Tile, Lazy)):
            self.fused(ins, lambda i: src)
            return
        self.settle(src_v)  # each element is read many times
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
            return self.get(src_v, src_i)
        self.fused(ins, fill, cost=1 + self.fused_cost(src_v))

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
        pass  # launches run one after the other here: the previous grid has completed

    def op_gdc_launch_dependents(self, ins: Instr) -> None:
        pass  # a scheduling hint with nothing to schedule


def lower(kernel: Kernel, checked: bool = True, debug: bool = False) -> tuple[ir.Module, CpuLowering]:
    """The LLVM module of `kernel` and its lowering (whose `sites` describe the errors)."""
    lw = CpuLowering(kernel, checked, debug)
    return lw.build(), lw


__all__ = ["CpuLowering", "CpuLoweringError", "lower", "ERR_WORDS", "ERR_LIST", "Site"]
