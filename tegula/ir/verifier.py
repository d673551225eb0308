"""The IR verifier: `verify(kernel, stage=None)` checks that a kernel is well formed and
raises `VerificationError` on the first problem, in textual order.

It owns the IR's static rules: operand/result/region counts and attribute classes from
the op table (`ops.OP_INFO`), the table's result-type rules, per-op typing (elementwise
shapes, pointers, loads/stores, shape ops, dot), power-of-two tile shapes, SSA
dominance across nested regions, the region conventions of `core.py` (for / if / while /
reduce / scan), terminators, and which ops a compilation stage allows (`STAGE_OPS`).
Tensor descriptors: a `tensordesc` value is only ever the result of
`make_tensor_descriptor` (never a kernel or region argument, never carried out of a
region), so a pass that rewrites descriptor accesses finds each one's parts there.
Block pointers may cross regions; their rules are in `verifier_block_pointers`.

The error message shows the printed IR with a `^^^ error: ...` marker under the
offending instruction and, when its source location is known, the user's source line.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from . import verifier_block_pointers as block_pointers
from .attrs import ATOMIC_KINDS, ATOMIC_SCOPES, ATOMIC_SEMS, DESCRIPTOR_REDUCE_KINDS, TURN_STEPS
from .core import UNKNOWN_LOC, Block, Instr, Kernel, Value
from .ops import BLOCK_POINTER_OPS, COMPARISONS, DESCRIPTOR_OPS, OP_INFO, TGIR_ONLY, VARIADIC, Kind, Op, type_class
from .printer import ValueNamer, kernel_arg_name, render_lines
from .types import (
    I1,
    I32,
    I64,
    BlockPtrType,
    PointerType,
    ScalarType,
    SmemType,
    TensorDescType,
    TileType,
    Type,
    element_of,
    shape_of,
    without_encoding,
)

# Which ops each compilation stage may contain: a set of `Op`s and/or `Kind`s, or None
# for "every op". Backends that lower to a restricted form register their stage here.
STAGE_OPS: dict[str, Optional[frozenset[Union[Op, Kind]]]] = {
    "tir": frozenset(Op) - TGIR_ONLY,
    "tir_opt": frozenset(Op) - TGIR_ONLY,
    "tgir": None,
}

_REGION_TERMINATOR = {Op.FOR: (Op.YIELD,), Op.IF: (Op.YIELD, Op.YIELD),
                      Op.WHILE: (Op.CONDITION, Op.YIELD), Op.REDUCE: (Op.YIELD,),
                      Op.SCAN: (Op.YIELD,)}
_CONVERSIONS = frozenset({Op.CAST, Op.BITCAST, Op.PTR_TO_INT, Op.INT_TO_PTR})


class VerificationError(Exception):
    """The IR breaks a rule. `message` is the one-line problem, `instr` the offending
    instruction (None for kernel-level problems); str() is the full report."""

    def __init__(self, message: str, instr: Optional[Instr], report: str):
        self.message = message
        self.instr = instr
        super().__init__(report)


class _Fail(Exception):
    def __init__(self, message: str, instr: Optional[Instr]):
        self.message, self.instr = message, instr


def _types(ts: Sequence[Type]) -> str:
    return "(" + ", ".join(str(t) for t in ts) + ")"


def _is_pow2(n: int) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


def _is_int(t: Type) -> bool:
    e = element_of(t)
    return isinstance(e, ScalarType) and e.is_int


def _is_i1(t: Type) -> bool:
    return element_of(t) == I1


class _Verifier:
    def __init__(self, kernel: Kernel, allowed: Optional[frozenset]):
        self.kernel = kernel
        self.allowed = allowed
        self.namer = ValueNamer.for_kernel(kernel)
        self.visible: set[Value] = set()   # defined and in scope at the current point
        self.defined: set[Value] = set()   # defined anywhere already visited
        self.all_defs: set[Value] = set(kernel.body.args)
        for ins in kernel.walk():
            self.all_defs.update(ins.results)
            for region in ins.regions:
                self.all_defs.update(region.args)

    def fail(self, message: str, ins: Optional[Instr]) -> None:
        raise _Fail(message, ins)

    def name(self, v: Value) -> str:
        return self.namer.name(v)

    # ------------------------------------------------------------ structure
    def run(self) -> None:
        k = self.kernel
        seen: set[str] = set()
        for i, a in enumerate(k.body.args):
            arg = kernel_arg_name(k, i)
            if arg in seen:
                self.fail(f"kernel argument name '{arg}' is used twice", None)
            seen.add(arg)
        self.block(k.body, None, Op.RETURN)

    def define(self, v: Value, ins: Optional[Instr]) -> None:
        if v in self.defined:
            self.fail(f"value {self.name(v)} is defined more than once", ins)
        self.check_type(v.type, f"value {self.name(v)}", ins)
        if isinstance(v.type, TensorDescType) and not (isinstance(v.owner, Instr)
                                                       and v.owner.op is Op.MAKE_TENSOR_DESCRIPTOR):
            self.fail(f"value {self.name(v)} of type {v.type}: tensor descriptors are made by "
                      "'make_tensor_descriptor' only (not carried through regions or arguments)", ins)
        if isinstance(v.type, BlockPtrType) and v.owner is self.kernel.body:
            self.fail(f"kernel argument {self.name(v)} of type {v.type}: block pointers are made in the kernel "
                      "('make_block_ptr')", ins)
        self.defined.add(v)
        self.visible.add(v)

    def check_type(self, t: Type, what: str, ins: Optional[Instr]) -> None:
        if not isinstance(t, (ScalarType, PointerType, TileType, SmemType, TensorDescType, BlockPtrType)):
            self.fail(f"{what} has no IR type ({t!r})", ins)
        problem = block_pointers.type_problem(t) if isinstance(t, BlockPtrType) else None
        if problem:
            self.fail(f"{what} has type {t}: {problem}", ins)
        if isinstance(t, TileType) and not all(_is_pow2(d) for d in t.shape):
            self.fail(f"{what} has type {t}: tile dimensions must be powers of two", ins)
        if isinstance(t, TensorDescType):
            if not (1 <= t.rank <= 5 and all(_is_pow2(d) for d in t.block)):
                self.fail(f"{what} has type {t}: a descriptor's block has 1 to 5 power-of-two dimensions", ins)
            if t.padding not in ("zero", "nan") or (t.padding == "nan" and not t.element.is_float):
                self.fail(f"{what} has type {t}: padding is 'zero', or 'nan' for float elements", ins)

    def block(self, block: Block, owner: Optional[Instr], terminator: Op) -> None:
        for a in block.args:
            self.define(a, owner)
        for i, ins in enumerate(block.instrs):
            self.instr(ins)
            if OP_INFO[ins.op].terminator and i != len(block.instrs) - 1:
                self.fail(f"terminator '{ins.op.value}' must be the last instruction of "
                          "its block", ins)
        last = block.terminator
        # an 'if' without results may end its program in one branch: an early return
        early_exit = (last is not None and last.op is Op.RETURN and owner is not None
                      and owner.op is Op.IF and not owner.results)
        if last is None or (last.op is not terminator and not early_exit):
            where = "the kernel body" if owner is None else f"a region of '{owner.op.value}'"
            got = "is empty" if last is None else f"ends in '{last.op.value}'"
            self.fail(f"{where} must end in '{terminator.value}', but it {got}",
                      last if last is not None else owner)
        # leave the block's scope: its values are not visible to enclosing blocks
        self.visible.difference_update(block.args)
        for ins in block.instrs:
            self.visible.difference_update(ins.results)

    def use(self, v: Value, ins: Instr) -> None:
        if v in self.visible:
            return
        what = f"operand {self.name(v)} of '{ins.op.value}'"
        if v in self.defined:
            self.fail(f"{what} is defined inside a region and is not visible here", ins)
        if v in self.all_defs:
            self.fail(f"{what} is used before its definition", ins)
        self.fail(f"{what} is not defined in this kernel", ins)

    # ------------------------------------------------------------ one instruction
    def instr(self, ins: Instr) -> None:
        op = ins.op
        if not isinstance(op, Op) or op not in OP_INFO:
            self.fail(f"unknown op {op!r}", ins)
        info = OP_INFO[op]
        if self.allowed is not None and op not in self.allowed and info.kind not in self.allowed:
            self.fail(f"op '{op.value}' is not allowed at this stage", ins)
        for v in ins.operands:
            self.use(v, ins)
            if isinstance(v.type, BlockPtrType) and op not in block_pointers.USERS:
                self.fail(f"'{op.value}' cannot take the block pointer {self.name(v)}", ins)
        n_in, n_out = len(ins.operands), len(ins.results)
        if info.operands != VARIADIC and n_in != info.operands:
            self.fail(f"'{op.value}' takes {info.operands} operand(s), got {n_in}", ins)
        if info.results != VARIADIC and n_out != info.results:
            self.fail(f"'{op.value}' has {info.results} result(s), got {n_out}", ins)
        if len(ins.regions) != info.regions:
            self.fail(f"'{op.value}' has {info.regions} region(s), got {len(ins.regions)}", ins)
        if info.attrs is not None and not isinstance(ins.attrs, info.attrs) \
                and not (info.attrs_optional and ins.attrs is None):
            got = "none" if ins.attrs is None else type(ins.attrs).__name__
            self.fail(f"'{op.value}' needs attributes of class {info.attrs.__name__}, got {got}", ins)
        if info.attrs is None and ins.attrs is not None:
            self.fail(f"'{op.value}' takes no attributes, got {type(ins.attrs).__name__}", ins)
        for r in ins.results:
            self.check_type(r.type, f"result {self.name(r)}", ins)
        self.op_rules(ins, info.kind)
        if info.result is not None:
            try:
                expected = info.result([v.type for v in ins.operands], ins.attrs)
            except Exception as e:  # a rule indexing a malformed operand list
                expected = None
                self.fail(f"cannot infer the result types of '{op.value}': {e}", ins)
            got = [r.type for r in ins.results]
            if expected is not None and not _results_match(got, list(expected)):
                self.fail(f"'{op.value}' should have result types {_types(expected)}, "
                          f"got {_types(got)}", ins)
        if ins.regions:
            self.regions(ins)
        for r in ins.results:
            self.define(r, ins)

    def shared(self, ins: Instr, ts: list[Type], rts: list[Type]) -> None:
        op = ins.op
        if op is Op.LOCAL_ALLOC and (not isinstance(rts[0], SmemType) or len(rts[0].shape) < 2):
            self.fail(f"'local_alloc' makes a shared-memory buffer of slots (rank >= 2), not a {rts[0]}", ins)
        if op is Op.LOCAL_DEALLOC and not isinstance(ts[0], SmemType):
            self.fail(f"'local_dealloc' frees a shared-memory buffer, not a {ts[0]}", ins)
        if op is Op.WARPGROUP_TURN:
            a = ins.attrs
            # barrier 0 is the CTA's and 1 the consumers' (warp_partitions); 16 in all
            if a.step not in TURN_STEPS or a.groups < 2 or not 2 <= a.barrier <= 16 - a.groups:
                self.fail(f"'warpgroup_turn' needs a step of {', '.join(TURN_STEPS)}, two warpgroups or more "
                          f"and named barriers 2..15, got {a}", ins)
            return
        if op in (Op.MBARRIER_INIT, Op.MBARRIER_WAIT, Op.MBARRIER_INVAL, Op.MBARRIER_ARRIVE, Op.TMA_LOAD):
            self.tma(ins, ts)
            return
        if op is Op.TMA_STORE:
            self.tma_store(ins, ts)
            return
        if op is Op.LOCAL_COPY:
            if (len(ts) != 4 or not isinstance(ts[0], SmemType) or not isinstance(ts[2], SmemType)
                    or ts[1] != I32 or ts[3] != I32 or ts[0].shape[1:] != ts[2].shape[1:]
                    or ts[0].element != ts[2].element):
                self.fail(f"'local_copy' takes two buffers of one slot shape and element, each with an i32 slot, "
                          f"got {_types(ts)}", ins)
            return
        if op is Op.LOCAL_STORE:
            if (len(ts) != 3 or not isinstance(ts[0], SmemType) or ts[1] != I32
                    or without_encoding(ts[2]) != TileType(ts[0].shape[1:], ts[0].element)):
                self.fail(f"'local_store' takes a buffer, an i32 slot and a tile of the slot's shape and element, "
                          f"got {_types(ts)}", ins)
            return
        if op not in (Op.LOCAL_LOAD, Op.ASYNC_COPY):
            return
        if len(ts) < 2 or not isinstance(ts[0], SmemType) or ts[1] != I32:
            self.fail(f"'{op.value}' takes a buffer and an i32 slot first, got {_types(ts[:2])}", ins)
        if op is Op.ASYNC_COPY:
            has_mask, has_bound = ins.attrs.has_mask, ins.attrs.has_bound
            want = 3 + has_mask + 2 * has_bound
            slot_type = TileType(ts[0].shape[1:], PointerType(ts[0].element))
            if len(ts) != want or without_encoding(ts[2]) != slot_type:
                extra = (" and a mask" if has_mask else "") + (" and an index and a bound" if has_bound else "")
                self.fail(f"'async_copy' into {ts[0]} takes pointers {slot_type}{extra}, got {_types(ts[2:])}", ins)
            if has_mask and (not _is_i1(ts[3]) or shape_of(ts[3]) != slot_type.shape):
                self.fail(f"'async_copy' mask must be i1 of shape {slot_type.shape}, got {ts[3]}", ins)
            if has_bound:
                index, bound = ts[3 + has_mask:]
                e = element_of(index)
                if (without_encoding(index) != without_encoding(bound) or shape_of(index) != slot_type.shape
                        or not (isinstance(e, ScalarType) and e.is_int and not e.is_bool)):
                    self.fail(f"'async_copy' index and bound must be integer tiles of one type and shape "
                              f"{slot_type.shape}, got {_types([index, bound])}", ins)

    def tma_store(self, ins: Instr, ts: list[Type]) -> None:
        buf, desc = ts[0], ts[1] if len(ts) > 1 else None
        if not isinstance(buf, SmemType) or not isinstance(desc, TensorDescType):
            self.fail(f"'tma_store' takes (buffer, descriptor, offsets..., value), got {_types(ts)}", ins)
        value = ts[-1]
        if (ts[2:-1] != [I32] * desc.rank or not isinstance(value, TileType)
                or tuple(shape_of(value)) != tuple(desc.block) or element_of(value) != desc.element
                or buf.element != desc.element or tuple(buf.shape) != (1, *desc.block)):
            self.fail(f"'tma_store' of {desc} takes a buffer smem<1x{'x'.join(map(str, desc.block))}x"
                      f"{desc.element}>, {desc.rank} i32 offsets and a block of its shape, got {_types(ts)}", ins)

    def tma(self, ins: Instr, ts: list[Type]) -> None:
        op = ins.op
        bars = ts[2] if op is Op.TMA_LOAD else ts[0]
        if not (isinstance(bars, SmemType) and len(bars.shape) == 2 and bars.shape[1] == 1 and bars.element == I64):
            self.fail(f"'{op.value}' takes a buffer of mbarriers (smem<Sx1xi64>), got {bars}", ins)
        if op is Op.MBARRIER_WAIT and ts[1:] != [I32, I32]:
            self.fail(f"'mbarrier_wait' takes an i32 slot and an i32 phase, got {_types(ts[1:])}", ins)
        if op is Op.MBARRIER_ARRIVE and ts[1:] != [I32]:
            self.fail(f"'mbarrier_arrive' takes an i32 slot, got {_types(ts[1:])}", ins)
        if op is Op.MBARRIER_INIT and ins.attrs is not None and not 1 <= ins.attrs.count < 1 << 20:
            self.fail(f"'mbarrier_init' count must be in [1, 2^20), got {ins.attrs.count}", ins)
        if op is not Op.TMA_LOAD:
            return
        buf, desc = ts[0], ts[4] if len(ts) > 4 else None
        if not isinstance(desc, TensorDescType) or not isinstance(buf, SmemType):
            self.fail(f"'tma_load' takes (buffer, slot, mbarriers, pred, descriptor, offsets...), "
                      f"got {_types(ts)}", ins)
        block = tuple(reversed(desc.block)) if ins.attrs.transposed else desc.block
        if (ts[1] != I32 or ts[3] != I1 or ts[5:] != [I32] * desc.rank or buf.element != desc.element
                or tuple(buf.shape[1:]) != block or bars.shape[0] != buf.shape[0]):
            self.fail(f"'tma_load' of {desc} takes a buffer of {'transposed ' if ins.attrs.transposed else ''}"
                      f"blocks with as many mbarriers, an i32 slot, an i1 predicate and {desc.rank} i32 offsets, "
                      f"got {_types(ts)}", ins)

    def op_rules(self, ins: Instr, kind: Kind) -> None:
        op, ts = ins.op, [v.type for v in ins.operands]
        rts = [r.type for r in ins.results]
        if kind is Kind.ELEMENTWISE:
            self.elementwise(ins, ts, rts)
        elif op in DESCRIPTOR_OPS:
            self.descriptor(ins, ts, rts)
        elif op in BLOCK_POINTER_OPS:
            problem = block_pointers.op_problem(ins, ts, rts)
            if problem:
                self.fail(problem, ins)
        elif op is Op.SPLAT:
            if shape_of(ts[0]) != () or element_of(rts[0]) != ts[0]:
                self.fail(f"'splat' turns a scalar into a tile of it: {ts[0]} -> {rts[0]}", ins)
        elif op is Op.BROADCAST:
            src, dst = shape_of(ts[0]), tuple(ins.attrs.shape)
            if len(src) != len(dst) or any(s not in (1, d) for s, d in zip(src, dst)):
                self.fail(f"cannot broadcast shape {src} to {dst}", ins)
        elif op is Op.RESHAPE:
            src, dst = shape_of(ts[0]), tuple(ins.attrs.shape)
            if _numel(src) != _numel(dst):
                self.fail(f"cannot reshape {src} to {dst}: element counts differ", ins)
        elif op is Op.EXPAND_DIMS:
            rank = len(shape_of(ts[0]))
            if not -rank - 1 <= ins.attrs.axis <= rank:
                self.fail(f"'expand_dims' axis {ins.attrs.axis} is out of range for rank {rank}", ins)
        elif op is Op.PERMUTE:
            if sorted(ins.attrs.order) != list(range(len(shape_of(ts[0])))):
                self.fail(f"'permute' order {ins.attrs.order} is not a permutation of the "
                          f"{len(shape_of(ts[0]))} dimensions", ins)
        elif op is Op.JOIN:
            if ts[0] != ts[1]:
                self.fail(f"'join' operands must have identical types, got {ts[0]} and {ts[1]}", ins)
        elif op is Op.SPLIT:
            if shape_of(ts[0])[-1:] != (2,):
                self.fail(f"'split' needs a last dimension of 2, got {ts[0]}", ins)
        elif op is Op.GATHER:
            self.gather(ins, ts)
        elif op in (Op.LOAD, Op.STORE):
            self.memory(ins, ts)
        elif op in (Op.ATOMIC_RMW, Op.ATOMIC_CAS):
            self.atomic(ins, ts)
        elif op in (Op.REDUCE, Op.SCAN):
            if not ts:
                self.fail(f"'{op.value}' needs at least one operand", ins)
            rank = len(shape_of(ts[0]))
            if any(shape_of(t) != shape_of(ts[0]) for t in ts) or rank == 0:
                self.fail(f"'{op.value}' operands must be tiles of one shape, got {_types(ts)}", ins)
            if not -rank <= ins.attrs.axis < rank:
                self.fail(f"'{op.value}' axis {ins.attrs.axis} is out of range for rank {rank}", ins)
        elif op is Op.DOT:
            self.dot(ins, ts)
        elif kind is Kind.SHARED:
            self.shared(ins, ts, rts)
        elif op is Op.CONVERT_LAYOUT:
            if not (isinstance(ts[0], TileType) and isinstance(rts[0], TileType)
                    and without_encoding(ts[0]) == without_encoding(rts[0])):
                self.fail(f"'convert_layout' keeps the tile's shape and element type, got {ts[0]} -> {rts[0]}", ins)
        elif op in (Op.PROGRAM_ID, Op.NUM_PROGRAMS) and ins.attrs.axis not in (0, 1, 2):
            self.fail(f"'{op.value}' axis must be 0, 1 or 2, got {ins.attrs.axis}", ins)
        elif op is Op.ARANGE and ins.attrs.end <= ins.attrs.start:
            self.fail(f"'arange' needs end > start, got [{ins.attrs.start}, {ins.attrs.end})", ins)
        elif op is Op.CONSTANT and not isinstance(ins.attrs.value, (bool, int, float)):
            self.fail(f"'constant' value must be a bool, int or float, got {ins.attrs.value!r}", ins)
        elif op is Op.ASSUME and not (_is_i1(ts[0]) and shape_of(ts[0]) == ()):
            self.fail(f"'assume' takes a scalar i1 condition, got {ts[0]}", ins)
        elif op is Op.FOR:
            if len(ts) < 3:
                self.fail(f"'for' takes lower bound, upper bound and step, got {len(ts)} operand(s)", ins)
            if not (all(t == ts[0] for t in ts[:3]) and _is_int(ts[0]) and shape_of(ts[0]) == ()):
                self.fail(f"'for' bounds and step must be scalars of one integer type, got "
                          f"{_types(ts[:3])}", ins)
        elif op is Op.IF:
            if not (_is_i1(ts[0]) and shape_of(ts[0]) == ()):
                self.fail(f"'if' condition must be a scalar i1, got {ts[0]}", ins)

    def elementwise(self, ins: Instr, ts: list[Type], rts: list[Type]) -> None:
        op = ins.op
        shapes = [shape_of(t) for t in ts]
        if op in _CONVERSIONS:
            if shape_of(rts[0]) != shapes[0]:
                self.fail(f"'{op.value}' must keep the shape: {ts[0]} -> {rts[0]}", ins)
            src, dst = element_of(ts[0]), element_of(rts[0])
            if op is Op.BITCAST and src.bits != dst.bits:
                self.fail(f"'bitcast' needs equal bit widths: {src} -> {dst}", ins)
            if op is Op.PTR_TO_INT and not (isinstance(src, PointerType) and _is_int(dst)):
                self.fail(f"'ptr_to_int' converts a pointer to an integer: {src} -> {dst}", ins)
            if op is Op.INT_TO_PTR and not (_is_int(src) and isinstance(dst, PointerType)):
                self.fail(f"'int_to_ptr' converts an integer to a pointer: {src} -> {dst}", ins)
            return
        if op is Op.INLINE_ASM:
            # the assembly reads and writes registers: operands of any type (numbers, or
            # addresses), results numbers, all of one shape (the frontend broadcasts them)
            if any(sh != shape_of(rts[0]) for sh in shapes):
                self.fail(f"'inline_asm_elementwise' operands must have the result's shape: {_types(ts)} -> {rts[0]}",
                          ins)
            if any(isinstance(element_of(t), PointerType) for t in rts):
                self.fail("'inline_asm_elementwise' returns numbers, not pointers", ins)
            return
        if any(s != shapes[0] for s in shapes):
            self.fail(f"operands of '{op.value}' must have identical shapes, got {_types(ts)}", ins)
        if op is Op.SELECT:
            if not _is_i1(ts[0]):
                self.fail(f"'select' condition must be i1, got {ts[0]}", ins)
            if ts[1] != ts[2]:
                self.fail(f"'select' values must have identical types, got {ts[1]} and {ts[2]}", ins)
            return
        if op is Op.ADDPTR:
            if not isinstance(element_of(ts[0]), PointerType) or not _is_int(ts[1]):
                self.fail(f"'addptr' takes a pointer and an integer offset, got {_types(ts)}", ins)
            return
        if op is Op.EXTERN_ELEMENTWISE:
            # a library signature: operand and result scalar types are the symbol's own
            if shape_of(rts[0]) != shapes[0]:
                self.fail(f"'extern_elementwise' must keep the operands' shape: {_types(ts)} -> {rts[0]}", ins)
            if any(isinstance(element_of(t), PointerType) for t in ts + rts):
                self.fail("'extern_elementwise' takes and returns numbers, not pointers", ins)
            return
        if any(t != ts[0] for t in ts):
            self.fail(f"operands of '{op.value}' must have identical types, got {_types(ts)}", ins)
        table = OP_INFO[op].llvm
        if table and "any" not in table and type_class(ts[0]) not in table:
            self.fail(f"'{op.value}' is not defined for {element_of(ts[0])}", ins)
        if op in COMPARISONS and not _is_i1(rts[0]):
            self.fail(f"comparison '{op.value}' must produce i1, got {rts[0]}", ins)

    def memory(self, ins: Instr, ts: list[Type]) -> None:
        a, load = ins.attrs, ins.op is Op.LOAD
        names = ["pointer"] + ([] if load else ["value"]) + (["mask"] if a.has_mask else [])
        names += ["other"] if load and a.has_other else []
        if len(ts) != len(names):
            self.fail(f"'{ins.op.value}' with these attributes takes operands "
                      f"({', '.join(names)}), got {len(ts)}", ins)
        ptr = element_of(ts[0])
        if not isinstance(ptr, PointerType):
            self.fail(f"'{ins.op.value}' needs a pointer operand, got {ts[0]}", ins)
        for name, t in zip(names[1:], ts[1:]):
            if shape_of(t) != shape_of(ts[0]):
                self.fail(f"'{ins.op.value}' {name} must have the pointer's shape "
                          f"{shape_of(ts[0])}, got {t}", ins)
            if name == "mask" and not _is_i1(t):
                self.fail(f"'{ins.op.value}' mask must be i1, got {t}", ins)
            if name in ("value", "other") and element_of(t) != ptr.pointee:
                self.fail(f"'{ins.op.value}' {name} must have the pointee type {ptr.pointee}, "
                          f"got {t}", ins)
            if getattr(t, "encoding", None) != getattr(ts[0], "encoding", None):
                self.fail(f"'{ins.op.value}' {name} must be laid out as its pointers (tgir), got {t} "
                          f"for pointers {ts[0]}", ins)

    def descriptor(self, ins: Instr, ts: list[Type], rts: list[Type]) -> None:
        op = ins.op
        if op is Op.MAKE_TENSOR_DESCRIPTOR:
            desc = rts[0] if rts else None
            if not isinstance(desc, TensorDescType):
                self.fail(f"'make_tensor_descriptor' makes a tensordesc, not a {desc}", ins)
            n = desc.rank
            want = [PointerType(desc.element)] + [I32] * n + [I64] * n
            if ts != want:
                self.fail(f"'make_tensor_descriptor' of {desc} takes (base, shape..., strides...) "
                          f"{_types(want)}, got {_types(ts)}", ins)
            return
        desc = ts[0] if ts else None
        if not isinstance(desc, TensorDescType):
            self.fail(f"'{op.value}' takes a tensor descriptor first, got {desc}", ins)
        n = desc.rank
        want = [desc] + [I32] * n + ([] if op is Op.DESCRIPTOR_LOAD else [desc.block_type])
        if [without_encoding(t) for t in ts] != want:
            value = "" if op is Op.DESCRIPTOR_LOAD else ", value"
            self.fail(f"'{op.value}' of {desc} takes (descriptor, offsets...{value}) {_types(want)}, "
                      f"got {_types(ts)}", ins)
        if op is Op.DESCRIPTOR_REDUCE:
            kind, elem = ins.attrs.kind, desc.element
            if kind not in DESCRIPTOR_REDUCE_KINDS or (kind != "add" and not elem.is_int) or elem.bits < 16:
                self.fail(f"'descriptor_reduce' kind {kind!r} is not defined for {elem}", ins)

    def atomic(self, ins: Instr, ts: list[Type]) -> None:
        a, rmw = ins.attrs, ins.op is Op.ATOMIC_RMW
        names = ["pointer"] + (["value"] + (["mask"] if a.has_mask else []) if rmw else ["cmp", "value"])
        if len(ts) != len(names):
            self.fail(f"'{ins.op.value}' with these attributes takes operands "
                      f"({', '.join(names)}), got {len(ts)}", ins)
        ptr = element_of(ts[0])
        if not isinstance(ptr, PointerType) or not isinstance(ptr.pointee, ScalarType):
            self.fail(f"'{ins.op.value}' needs a pointer to a scalar, got {ts[0]}", ins)
        for name, t in zip(names[1:], ts[1:]):
            if shape_of(t) != shape_of(ts[0]):
                self.fail(f"'{ins.op.value}' {name} must have the pointer's shape "
                          f"{shape_of(ts[0])}, got {t}", ins)
            want = I1 if name == "mask" else ptr.pointee
            if element_of(t) != want:
                self.fail(f"'{ins.op.value}' {name} must be {want}, got {t}", ins)
            if getattr(t, "encoding", None) != getattr(ts[0], "encoding", None):
                self.fail(f"'{ins.op.value}' {name} must be laid out as its pointers (tgir), got {t} "
                          f"for pointers {ts[0]}", ins)
        if a.sem not in ATOMIC_SEMS or a.scope not in ATOMIC_SCOPES:
            self.fail(f"'{ins.op.value}' memory semantic / scope must be one of {ATOMIC_SEMS} / "
                      f"{ATOMIC_SCOPES}, got {a.sem!r} / {a.scope!r}", ins)
        if not rmw:
            if ptr.pointee.bits not in (16, 32, 64):
                self.fail(f"'atomic_cas' needs 16-, 32- or 64-bit elements, got {ptr.pointee}", ins)
            return
        elem = ptr.pointee
        ok = {"add": _is_int(elem), "fadd": elem.is_float, "max": _is_int(elem), "min": _is_int(elem),
              "and": _is_int(elem), "or": _is_int(elem), "xor": _is_int(elem), "xchg": True}
        if a.kind not in ATOMIC_KINDS or not ok[a.kind]:
            self.fail(f"'atomic_rmw' kind {a.kind!r} is not defined for {elem}", ins)
        if elem.bits < 16 or (elem.bits == 16 and a.kind != "fadd"):
            self.fail(f"'atomic_rmw {a.kind}' is not defined for {elem} (16-bit elements: fadd only)", ins)

    def gather(self, ins: Instr, ts: list[Type]) -> None:
        """gather src, index: tiles of one rank that agree off `axis`, an integer index,
        a non-pointer source (the backends move the source's bits, not addresses)."""
        src, idx = shape_of(ts[0]), shape_of(ts[1])
        axis = ins.attrs.axis
        if not src or len(src) != len(idx) or not 0 <= axis < len(src):
            self.fail(f"'gather' needs a source and an index of one rank and an axis within it, got "
                      f"{ts[0]}, {ts[1]} and axis {axis}", ins)
            return
        if any(s != i for d, (s, i) in enumerate(zip(src, idx)) if d != axis):
            self.fail(f"'gather' source {ts[0]} and index {ts[1]} differ off axis {axis}", ins)
        ie, se = element_of(ts[1]), element_of(ts[0])
        if not isinstance(ie, ScalarType) or not ie.is_int:
            self.fail(f"'gather' needs an integer index, got {ts[1]}", ins)
        if not isinstance(se, ScalarType):
            self.fail(f"'gather' needs a tile of scalars as its source, got {ts[0]}", ins)

    def dot(self, ins: Instr, ts: list[Type]) -> None:
        a, b, c = (shape_of(t) for t in ts)
        ok = len(a) in (2, 3) and len(a) == len(b) == len(c)
        ok = ok and a[:-2] == b[:-2] == c[:-2] and a[-1] == b[-2]
        ok = ok and c[-2:] == (a[-2], b[-1])
        if not ok:
            self.fail(f"'dot' shapes do not match (M x K) @ (K x N) + (M x N): {_types(ts)}", ins)

    # ------------------------------------------------------------ regions
    def regions(self, ins: Instr) -> None:
        op = ins.op
        ts, rts = [v.type for v in ins.operands], [r.type for r in ins.results]
        terms = _REGION_TERMINATOR.get(op, (Op.YIELD,) * len(ins.regions))
        if op is Op.FOR:
            self.args(ins, ins.regions[0], [ts[0]] + ts[3:], "the 'for' body (iv, iters)")
        elif op is Op.IF:
            self.args(ins, ins.regions[0], [], "the 'then' region of 'if'")
            self.args(ins, ins.regions[1], [], "the 'else' region of 'if'")
        elif op is Op.WHILE:
            self.args(ins, ins.regions[0], ts, "the 'before' region of 'while'")
        elif op in (Op.REDUCE, Op.SCAN):
            scalars = [element_of(t) for t in ts]
            self.args(ins, ins.regions[0], scalars * 2, f"the combine region of '{op.value}'")
        for region, term in zip(ins.regions, terms):
            self.block(region, ins, term)
        if op is Op.FOR:
            self.yields(ins, ins.regions[0], ts[3:], "the loop-carried values")
        elif op is Op.IF:
            self.yields(ins, ins.regions[0], rts, "the results of 'if'")
            self.yields(ins, ins.regions[1], rts, "the results of 'if'")
        elif op is Op.WHILE:
            cond = ins.regions[0].terminator
            if not cond.operands or not (_is_i1(cond.operands[0].type)
                                         and shape_of(cond.operands[0].type) == ()):
                self.fail("'condition' must take a scalar i1 first operand", cond)
            vals = [v.type for v in cond.operands[1:]]
            if rts != vals:
                self.fail(f"'while' results {_types(rts)} must have the types of the "
                          f"'condition' values {_types(vals)}", ins)
            self.args(ins, ins.regions[1], vals, "the 'after' region of 'while'")
            self.yields(ins, ins.regions[1], ts, "the loop-carried values of 'while'")
        elif op in (Op.REDUCE, Op.SCAN):
            self.yields(ins, ins.regions[0], [element_of(t) for t in ts],
                        f"the scalar element types of '{op.value}'")

    def args(self, ins: Instr, block: Block, expected: list[Type], what: str) -> None:
        got = [a.type for a in block.args]
        if got != list(expected):
            self.fail(f"{what} must take arguments {_types(expected)}, got {_types(got)}", ins)

    def yields(self, ins: Instr, block: Block, expected: list[Type], what: str) -> None:
        term = block.terminator
        if term.op is Op.RETURN:  # an early exit (see `block`) yields nothing
            return
        got = [v.type for v in term.operands]
        if got != list(expected):
            self.fail(f"'yield' in a region of '{ins.op.value}' yields {_types(got)}, but "
                      f"{what} have types {_types(expected)}", term)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def format_error(kernel: Kernel, message: str, ins: Optional[Instr]) -> str:
    """The report: headline, the IR with a marker under the offending instruction (or
    the kernel header), and the user's source line when the location is known."""
    lines, where = render_lines(kernel)
    row = where.get(id(ins), 0) if ins is not None else 0
    text = lines[row]
    start = len(text) - len(text.lstrip())
    marker = " " * start + "^" * max(3, len(text) - start) + f" error: {message}"
    out = [f"IR verification failed: {message}", *lines[:row + 1], marker, *lines[row + 1:]]
    loc = ins.loc if ins is not None else kernel.loc
    if loc is not None and loc != UNKNOWN_LOC and loc.line > 0:
        from ..errors import render_location  # lazy: tegula.errors imports tegula.ir
        out.append(render_location(loc, message))
    return "\n".join(out)


def _results_match(got: list[Type], expected: list[Type]) -> bool:
    """Result types against a rule's: where the rule states no encoding (it cannot
    infer one: reductions, views, loads of new shapes) the result may carry any; where
    it does (elementwise ops keep their operands'), it must be that one."""
    if len(got) != len(expected):
        return False
    return all(g == e or (isinstance(e, TileType) and e.encoding is None and without_encoding(g) == e)
               for g, e in zip(got, expected))


def verify(kernel: Kernel, stage: Optional[str] = None) -> None:
    """Check `kernel`; raise `VerificationError` describing the first problem.

    `stage` names a compilation stage in `STAGE_OPS` whose allowed ops are enforced."""
    allowed = None
    if stage is not None:
        if stage not in STAGE_OPS:
            raise ValueError(f"unknown IR stage {stage!r}; known: {', '.join(sorted(STAGE_OPS))}")
        allowed = STAGE_OPS[stage]
    try:
        _Verifier(kernel, allowed).run()
    except _Fail as f:
        raise VerificationError(f.message, f.instr, format_error(kernel, f.message, f.instr)) from None
