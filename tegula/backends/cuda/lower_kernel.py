"""Lowering of a layout-annotated kernel to an LLVM module for NVPTX.

Each thread holds its share of a tile as a list of LLVM scalars, one per register of
the value's layout (`Tile.regs[r]` is the element `layout.element(r, lane, warp)`); a
scalar IR value is one LLVM value, the same in every thread. `KernelLowering` owns the
function, the builders, the value map and the services every op lowering uses: operands
in the layout the plan requires (converting when needed, see `convert`), per-layout
thread coordinates (computed once in the entry block), the shared-memory scratch the
allocation pass gave the op (`scratch`; barriers between ops are `barrier` ops the
barrier pass placed), combine regions, and source locations. The op lowerings themselves live in
the `lower_*` modules and register in `registry.HANDLERS`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.types import ScalarType, element_of
from ..llvm.scalar_ops import ScalarTarget
from ..llvm.types import I32, llvm_type
from . import convert as conv
from . import (  # noqa: F401  (registers the op lowerings)
    lower_atomic,
    lower_control,
    lower_debug,
    lower_dot,
    lower_elementwise,
    lower_gather,
    lower_inline_asm,
    lower_layout,
    lower_memory,
    lower_reduce,
    lower_scan,
    lower_shape,
    lower_shared,
    lower_tma,
    lower_wgmma,
    warpgroup_turns,
)
from .checked import CheckedMode
from .layout_plan import LayoutPlan
from .line_info import LineInfo
from .linear_layout import LinearLayout, dim_fields
from .nvptx_target import NVPTXTarget
from .nvvm import NVPTXDevice
from .register_offsets import RegisterOffsets
from .registry import HANDLERS
from .tma import tensormap_params
from .warp_partitions import Partition, producer_warps


@dataclass
class Tile:
    regs: list[ir.Value]
    layout: Optional[LinearLayout]


class KernelLowering:
    def __init__(self, kernel: Kernel, plan: LayoutPlan, capability: int, *,
                 debug: bool = False, checked: bool = False, device: Optional[NVPTXDevice] = None,
                 target: Optional[ScalarTarget] = None, fp_fusion: bool = True,
                 rematerialized_descriptors: bool = False):
        self.kernel = kernel
        # wgmma descriptors of operands staged once built so that ptxas recomputes
        # them rather than keeping (or spilling) them (`lower_wgmma.base_descriptor`);
        # `staged_descriptors`: whether the kernel has any, i.e. whether the choice matters
        self.rematerialized_descriptors = rematerialized_descriptors
        self.staged_descriptors = False
        self.dev = device or NVPTXDevice()
        self.plan = plan
        self.num_warps = plan.num_warps
        self.capability = capability
        self.debug = debug
        self.target = target or NVPTXTarget(capability, fp_contract=fp_fusion, device=self.dev)
        self.module = ir.Module(name=kernel.name)
        self.module.triple = self.dev.triple
        self.vals: dict[Value, Tile] = {}
        self.conv_cache: list[dict[tuple[Value, LinearLayout], list[ir.Value]]] = [{}]
        self.thread_cache: dict[LinearLayout, tuple[ir.Value, list[ir.Value]]] = {}
        self.dup_cache: dict[LinearLayout, ir.Value] = {}
        self.register_offsets = RegisterOffsets()
        self.loop_depth = 0
        # the start of the current op's scratch (`scratch`); scratch offsets are
        # relative to it
        self.scratch_base = 0
        self.buffer_of: dict[Value, Any] = {}
        # local_load results read in place by their users: (buffer, slot byte offset)
        self.shared_views: dict[Value, tuple[Any, ir.Value]] = {}
        # a wgmma dot left in flight -> its A operand's registers, read by its dot_wait
        self.in_flight_inputs: dict[Value, list[ir.Value]] = {}
        self.checked: Optional[CheckedMode] = CheckedMode(kernel) if checked else None
        # tensor descriptors TMA reads through: the generic address of their tensor map
        self.tensormap_of: dict[Value, ir.Value] = {}
        self.current: Optional[Instr] = None
        # the warp partition being lowered (`warp_partitions`): its barrier and first thread
        self.partition = Partition()
        self.total_warps = self.num_warps + producer_warps(kernel)

    # ---------------------------------------------------------------- the function
    def build(self) -> ir.Module:
        params = []
        for a in self.kernel.args:
            e = element_of(a.type)
            # booleans travel as 32-bit ints (what ctypes and the driver pass)
            params.append(I32 if isinstance(e, ScalarType) and e.is_bool else llvm_type(e))
        if self.checked:
            params += self.checked.param_types()
        # TMA tensor maps the launcher encodes, one per descriptor TMA reads through
        self.tensormap_specs = tensormap_params(self.kernel)
        first_map = len(params)
        params += [self.dev.tensormap_param_type()] * len(self.tensormap_specs)
        n_own = len(params)
        params += self.dev.extra_params()
        fnty = ir.FunctionType(ir.VoidType(), params)
        self.fn = fn = ir.Function(self.module, fnty, self.kernel.name)
        self.lines = LineInfo(self.module, fn, self.kernel.loc)
        entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.pb = ir.IRBuilder(entry)
        self.pb.debug_metadata = self.lines.entry
        self.b = ir.IRBuilder(body)
        self.b.debug_metadata = self.lines.entry
        self.dev.begin(fn, self.pb, list(fn.args[n_own:]))
        tid = self.dev.sreg(self.pb, "tid.x")
        self.lane = self.pb.and_(tid, ir.Constant(I32, 31))
        # The warp index read back through a shuffle from lane 0 (as Triton does): the
        # value is then known warp-uniform, so what derives from it (a warpgroup's
        # wgmma descriptors, its slot offsets) is computed in the uniform datapath
        # instead of per thread and moved over with R2UR before every wgmma.
        self.warp = self.dev.shfl_i32(self.pb, "idx", self.pb.lshr(tid, ir.Constant(I32, 5)), ir.Constant(I32, 0))
        self.tid = tid
        for i, a in enumerate(self.kernel.args):
            p = fn.args[i]
            p.name = self.kernel.arg_names[i] if i < len(self.kernel.arg_names) else f"arg{i}"
            e = element_of(a.type)
            if isinstance(e, ScalarType) and e.is_bool:
                p = self.pb.icmp_unsigned("!=", p, ir.Constant(I32, 0))
            self.vals[a] = Tile([p], None)
        if self.checked:
            self.checked.bind(self, fn.args[len(self.kernel.args):])
        for i, (make, _spec) in enumerate(self.tensormap_specs):
            self.dev.tensormap_param(self.module, fn, first_map + i)
            fn.args[first_map + i].name = f"tensormap{i}"
            self.tensormap_of[make.results[0]] = self.dev.tensormap_address(self.pb, fn.args[first_map + i])
        self.lower_block(self.kernel.body)
        if not self.b.block.is_terminated:
            self.b.ret_void()
        self.pb.branch(body)
        self.dev.annotate(self.module, fn, 32 * self.total_warps)
        return self.module

    # ---------------------------------------------------------------- blocks & values
    def lower_block(self, block: Block) -> None:
        for ins in block.instrs:
            self.lower_instr(ins)

    def lower_instr(self, ins: Instr) -> None:
        handler = HANDLERS.get(ins.op)
        if handler is None:
            raise CompilationError(f"the CUDA backend cannot lower '{ins.op.value}' yet", ins.loc)
        saved = self.current
        self.current = ins
        self.b.debug_metadata = self.lines.location(ins.loc)
        try:
            handler(self, ins)
        finally:
            self.current = saved

    def tile(self, v: Value) -> Tile:
        try:
            return self.vals[v]
        except KeyError:
            raise CompilationError(f"value {v} used before it is defined", self.loc()) from None

    def scalar(self, v: Value) -> ir.Value:
        t = self.tile(v)
        assert t.layout is None and len(t.regs) == 1, v
        return t.regs[0]

    def operand(self, ins: Instr, k: int) -> list[ir.Value]:
        """Operand k's registers in the layout the plan says `ins` consumes it in."""
        v = ins.operands[k]
        t = self.tile(v)
        want = self.plan.required(ins, k)
        if t.layout is None or want is None or t.layout == want:
            return t.regs
        return self.convert(v, want)

    def convert(self, v: Value, want: LinearLayout) -> list[ir.Value]:
        key = (v, want)
        for scope in reversed(self.conv_cache):
            if key in scope:
                return scope[key]
        regs = conv.convert_value(self, v, want)
        self.conv_cache[-1][key] = regs
        return regs

    def define(self, v: Value, regs: Sequence[ir.Value], layout: Optional[LinearLayout] = None) -> None:
        lay = layout if layout is not None else self.plan.layouts.get(v)
        regs = list(regs)
        if lay is None:
            assert len(regs) == 1, (v, len(regs))
        else:
            assert len(regs) == lay.n_regs, (v, len(regs), lay.n_regs)
        self.vals[v] = Tile(regs, lay)

    def push_scope(self) -> None:
        """Entering a region (a branch or a loop body): conversions emitted inside it do
        not dominate code after it."""
        self.conv_cache.append({})

    def pop_scope(self) -> None:
        self.conv_cache.pop()

    def run_region(self, block: Block, args: Sequence[ir.Value]) -> list[ir.Value]:
        """Lower a combine region on scalars; returns the yielded values."""
        for a, v in zip(block.args, args):
            self.vals[a] = Tile([v], None)
        for ins in block.instrs[:-1]:
            self.lower_instr(ins)
        return [self.scalar(o) for o in block.terminator.operands]

    def loc(self) -> Any:
        return self.current.loc if self.current is not None else self.kernel.loc

    # ---------------------------------------------------------------- thread coordinates
    def thread_part(self, lay: LinearLayout) -> ir.Value:
        """The flat-index contribution of this thread's lane and warp bits (i32)."""
        return self._thread(lay)[0]

    def thread_coords(self, lay: LinearLayout) -> list[ir.Value]:
        return self._thread(lay)[1]

    def _thread(self, lay: LinearLayout) -> tuple[ir.Value, list[ir.Value]]:
        if lay in self.thread_cache:
            return self.thread_cache[lay]
        pb = self.pb
        part: ir.Value = ir.Constant(I32, 0)
        combine = pb.or_ if lay.is_disjoint() else pb.xor
        for src, bases in ((self.lane, lay.lane), (self.warp, lay.warp)):
            i = 0
            while i < len(bases):
                b0 = bases[i]
                if b0 == 0:
                    i += 1
                    continue
                j = i + 1
                if b0 & (b0 - 1) == 0:
                    # a run of input bits mapping to consecutive output bits is one field
                    while j < len(bases) and bases[j] == bases[j - 1] << 1:
                        j += 1
                    field = pb.and_(pb.lshr(src, ir.Constant(I32, i)), ir.Constant(I32, (1 << (j - i)) - 1))
                    term = pb.shl(field, ir.Constant(I32, b0.bit_length() - 1))
                else:
                    bit = pb.and_(pb.lshr(src, ir.Constant(I32, i)), ir.Constant(I32, 1))
                    term = pb.mul(bit, ir.Constant(I32, b0))
                part = combine(part, term)
                i = j
        coords = [pb.and_(pb.lshr(part, ir.Constant(I32, s)), ir.Constant(I32, (1 << n) - 1))
                  for s, n in dim_fields(lay.shape)]
        self.thread_cache[lay] = (part, coords)
        return part, coords

    def element_coords(self, lay: LinearLayout, r: int) -> list[ir.Value]:
        """The coordinates (i32 per dimension) of the element register r holds. Where the
        register's bits and the thread's are disjoint, each is the thread's coordinate
        plus a constant, remembered as such (`register_offsets`)."""
        reg = lay.reg_element(r)
        if lay.is_disjoint():
            return [self.register_offsets.offset(self.b, tc, (reg >> s) & ((1 << n) - 1))
                    for (s, n), tc in zip(dim_fields(lay.shape), self.thread_coords(lay))]
        flat = self.b.xor(self.thread_part(lay), ir.Constant(I32, reg))
        return [self.b.and_(self.b.lshr(flat, ir.Constant(I32, s)), ir.Constant(I32, (1 << n) - 1))
                for s, n in dim_fields(lay.shape)]

    def element_flat(self, lay: LinearLayout, r: int) -> ir.Value:
        """Register r's flat index (an element offset in shared-memory maps). Where the
        register's bits cannot meet a bit the thread part sets, the XOR is an add, so
        the offsets of a thread's registers are one base plus constants (the constants
        fold into address immediates, one base register instead of one per access;
        the swizzled slot layouts are the case: their XOR mixes a row's bits into its
        column chunk, which a thread's copies, 8+ rows apart, leave alone)."""
        reg = lay.reg_element(r)
        tp = self.thread_part(lay)
        if reg & lay.thread_bits() == 0:
            return self.b.add(tp, ir.Constant(I32, reg)) if reg else tp
        return self.b.xor(tp, ir.Constant(I32, reg))

    def element_byte_offset(self, lay: LinearLayout, r: int, size: int, base: "int | ir.Value") -> ir.Value:
        """`base` + register r's flat index × `size` (bytes into shared memory). Where
        the register's part is added (`element_flat`), it is added last: `(base + thread
        part × size) + constant`, so that a thread's accesses share one base and their
        constants fold into address immediates. (Added before the base, LLVM turns the
        add of a constant whose bits the thread part leaves clear into an `or`, which the
        base added after it cannot fold: the B slot of a 128x128x64 matmul took eight
        address registers and an IMAD each per iteration.)"""
        b = self.b
        base = ir.Constant(I32, base) if isinstance(base, int) else base
        reg = lay.reg_element(r)
        if reg and reg & lay.thread_bits() == 0:
            start = b.add(b.mul(self.thread_part(lay), ir.Constant(I32, size)), base)
            return b.add(start, ir.Constant(I32, reg * size))
        return b.add(b.mul(self.element_flat(lay, r), ir.Constant(I32, size)), base)

    def duplicate_free(self, lay: Optional[LinearLayout]) -> Optional[ir.Value]:
        """An i1 true in exactly one thread of each group holding the same elements
        (stores and prints use it to act once), or None when no thread duplicates."""
        pb = self.pb
        if lay is None:
            return self.first_thread()
        lane_mask = sum(1 << i for i, b in enumerate(lay.lane) if b == 0)
        warp_mask = sum(1 << i for i, b in enumerate(lay.warp) if b == 0)
        if not lane_mask and not warp_mask:
            return None
        if lay not in self.dup_cache:
            bits = pb.or_(pb.and_(self.lane, ir.Constant(I32, lane_mask)),
                          pb.shl(pb.and_(self.warp, ir.Constant(I32, warp_mask)), ir.Constant(I32, 5)))
            self.dup_cache[lay] = pb.icmp_unsigned("==", bits, ir.Constant(I32, 0))
        return self.dup_cache[lay]

    # ---------------------------------------------------------------- shared memory
    def scratch(self, nbytes: int) -> int:
        """The scratch of the op being lowered (`allocate_shared_memory` wrote its byte
        range on it; `insert_barriers` put any barrier its first write needs before
        it): sets `scratch_base` to its start and returns 0, the offset of the bytes
        it asked for within it."""
        ins = self.current
        if ins is None or ins.smem is None or nbytes > ins.smem[1]:
            got = None if ins is None else ins.smem
            raise CompilationError(f"'{getattr(getattr(ins, 'op', None), 'value', '?')}' needs {nbytes} bytes of "
                                   f"shared scratch but was given {got} (tgir without allocation?)", self.loc())
        self.scratch_base = ins.smem[0]
        return 0

    def shared_operand(self, v: Value, offsets: Any) -> Optional[ir.Value]:
        """The shared byte offset of the slot `v` was read from, when `v` is a slot read
        in place (lower_shared) whose layout is `offsets`; else None."""
        view = self.shared_views.get(v)
        if view is None or view[0].offsets != offsets:
            return None
        return view[1]

    def smem_written(self) -> None:
        """Between writing scratch and reading it back."""
        self.barrier()

    def barrier(self) -> None:
        """A barrier of the threads lowering this code: the CTA's (`bar.sync 0`), or the
        named barrier of the warp partition being lowered."""
        named = self.partition.barrier
        if self.partition.single:
            raise CompilationError("a barrier in code one thread runs alone (a warp-specialized kernel's "
                                   "producer)", self.loc())
        if named is None:
            self.dev.barrier(self.b)
        else:
            self.dev.named_barrier(self.b, *named)

    def first_thread(self) -> ir.Value:
        """An i1 true in the first thread of the partition being lowered (thread 0 of
        the CTA outside warp-specialized code): the one that acts alone."""
        return self.b.icmp_unsigned("==", self.tid, ir.Constant(I32, self.partition.first_thread))
