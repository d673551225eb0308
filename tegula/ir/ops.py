"""The IR's operations: one `Op` enum and one property table beside it.

Each row (`OpInfo`) says how many operands and results an op has, its kind, whether it
is pure and commutative, its attribute class, the numpy function that defines its
elementwise semantics (see `numpy_ops`), the LLVM opcode per type class, and the rule
that gives its result types. Constant folding, the interpreter, the verifier and the
LLVM lowerings all read this one table: adding an op is one row here, one interpreter
rule and one lowering per backend (a test checks that every op has all of them).

Conventions the whole IR relies on:
- Elementwise ops take operands of identical shape (the frontend inserts splat and
  broadcast); scalars are rank-0 values.
- LLVM opcode strings are keyed by type class `sint`, `uint`, `float`, `ptr`:
  `add`, `fadd`, `icmp slt`, `fcmp olt`, `math:<name>` (a math function the backend
  picks per target: libdevice on NVPTX, libm or an intrinsic on the host).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from . import attrs as A
from . import numpy_ops as npo
from .types import (
    I1,
    I32,
    I64,
    BlockPtrType,
    PointerType,
    SmemType,
    TensorDescType,
    TileType,
    Type,
    element_of,
    shape_of,
    with_element,
    with_shape,
)


class Kind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCE = "reduce"
    MEMORY = "memory"
    CONTROL = "control"
    META = "meta"
    SHAPE = "shape"
    SOURCE = "source"  # no data operands: constants, program ids, arange
    DOT = "dot"
    DESCRIPTOR = "descriptor"  # makes a tensor descriptor or block pointer (a value, no memory access)
    SHARED = "shared"  # tgir only: shared-memory buffers and asynchronous copies into them
    LAYOUT = "layout"  # tgir only: moves a tile between encodings (values unchanged)


class Op(enum.Enum):
    # sources
    CONSTANT = "constant"
    PROGRAM_ID = "program_id"
    NUM_PROGRAMS = "num_programs"
    ARANGE = "arange"
    # hardware counters (`tl.extra.cuda.smid` / `globaltimer`)
    SMID = "smid"
    GLOBALTIMER = "globaltimer"
    # unary elementwise
    NEG = "neg"
    NOT = "not"
    ABS = "abs"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    SIN = "sin"
    COS = "cos"
    SQRT = "sqrt"
    SQRT_RN = "sqrt_rn"
    RSQRT = "rsqrt"
    ERF = "erf"
    CEIL = "ceil"
    FLOOR = "floor"
    # binary elementwise
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"          # float division, IEEE round to nearest
    FDIV = "fdiv"        # float division with selectable (approximate) rounding
    IDIV = "idiv"        # integer division truncating toward zero
    REM = "rem"          # remainder with the dividend's sign (ints and floats)
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHL = "shl"
    SHR = "shr"          # arithmetic for signed, logical for unsigned
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    UMULHI = "umulhi"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    ADDPTR = "addptr"    # pointer + integer offset counted in elements
    # ternary elementwise
    FMA = "fma"
    EXTERN_ELEMENTWISE = "extern_elementwise"  # a library function (libdevice) per element
    INLINE_ASM = "inline_asm_elementwise"  # the user's PTX, `pack` elements per execution
    SELECT = "select"
    # conversions
    CAST = "cast"
    BITCAST = "bitcast"
    PTR_TO_INT = "ptr_to_int"
    INT_TO_PTR = "int_to_ptr"
    # shape
    SPLAT = "splat"
    BROADCAST = "broadcast"
    EXPAND_DIMS = "expand_dims"
    RESHAPE = "reshape"
    PERMUTE = "permute"
    JOIN = "join"
    SPLIT = "split"
    GATHER = "gather"    # out[..i..] = src[..index[..i..] at `axis`..] (tl.gather)
    # memory
    LOAD = "load"
    STORE = "store"
    ATOMIC_RMW = "atomic_rmw"
    ATOMIC_CAS = "atomic_cas"
    # tensor descriptors (block accesses of a strided tensor, bounds-checked per dimension)
    MAKE_TENSOR_DESCRIPTOR = "make_tensor_descriptor"
    DESCRIPTOR_LOAD = "descriptor_load"
    DESCRIPTOR_STORE = "descriptor_store"
    DESCRIPTOR_REDUCE = "descriptor_reduce"
    # block pointers (a window of a strided tensor, moved by `advance`, loop-carried)
    MAKE_BLOCK_PTR = "make_block_ptr"
    ADVANCE = "advance"
    BLOCK_LOAD = "block_load"
    BLOCK_STORE = "block_store"
    # reductions, scans, matrix product
    REDUCE = "reduce"
    SCAN = "scan"
    DOT = "dot"
    # structured control flow and terminators
    FOR = "for"
    IF = "if"
    WHILE = "while"
    YIELD = "yield"
    CONDITION = "condition"
    RETURN = "return"
    # shared memory and asynchronous copies (the backend stage `tgir` only)
    LOCAL_ALLOC = "local_alloc"
    LOCAL_LOAD = "local_load"
    LOCAL_DEALLOC = "local_dealloc"
    LOCAL_COPY = "local_copy"
    LOCAL_STORE = "local_store"
    ASYNC_COPY = "async_copy"
    ASYNC_COMMIT = "async_commit"
    ASYNC_WAIT = "async_wait"
    DOT_WAIT = "dot_wait"
    TMA_LOAD = "tma_load"
    TMA_STORE = "tma_store"
    BULK_WAIT = "bulk_wait"
    MBARRIER_INIT = "mbarrier_init"
    MBARRIER_WAIT = "mbarrier_wait"
    MBARRIER_INVAL = "mbarrier_inval"
    MBARRIER_ARRIVE = "mbarrier_arrive"
    WARP_ROLE = "warp_role"
    WARPGROUP_TURN = "warpgroup_turn"
    BARRIER = "barrier"
    # encodings (the backend stage `tgir` only)
    CONVERT_LAYOUT = "convert_layout"
    # meta
    DEVICE_PRINT = "device_print"
    DEVICE_ASSERT = "device_assert"
    DEBUG_BARRIER = "debug_barrier"
    # programmatic dependent launch (`tl.extra.cuda.gdc_wait` / `gdc_launch_dependents`)
    GDC_WAIT = "gdc_wait"
    GDC_LAUNCH_DEPENDENTS = "gdc_launch_dependents"
    ASSUME = "assume"
    HINT = "hint"


VARIADIC = -1

ResultRule = Callable[[list[Type], Any], Optional[list[Type]]]


@dataclass(frozen=True)
class OpInfo:
    """One row of the op table. `result` returns the result types implied by the operand
    types and attributes, or None when the result type is chosen by the producer (casts,
    constants, loads of a bitcast pointer, ...) and is only checked for shape."""

    kind: Kind
    operands: int
    results: int = 1
    attrs: Optional[type] = None
    pure: bool = True
    commutative: bool = False
    numpy: Optional[Callable[..., np.ndarray]] = None
    llvm: dict[str, str] = field(default_factory=dict)
    result: Optional[ResultRule] = None
    regions: int = 0
    terminator: bool = False
    # the op may also carry no attributes at all (None: every field at its default)
    attrs_optional: bool = False


def _same(ts, _a):
    return [ts[0]]


def _compare(ts, _a):
    return [with_element(ts[0], I1)]


def _second(ts, _a):
    return [ts[1]]


def _third(ts, _a):
    return [ts[2]]


def _none(ts, _a):
    return []


def _scalar_i32(ts, _a):
    return [I32]


def _scalar_i1(ts, _a):
    return [I1]


def _scalar_i64(ts, _a):
    return [I64]


def _arange(ts, a):
    return [TileType((a.end - a.start,), I32)]


def _expand_dims(ts, a):
    shape = list(shape_of(ts[0]))
    axis = a.axis if a.axis >= 0 else a.axis + len(shape) + 1
    shape.insert(axis, 1)
    return [with_shape(element_of(ts[0]), tuple(shape))]


def _shape_attr(ts, a):
    return [with_shape(element_of(ts[0]), tuple(a.shape))]


def _permute(ts, a):
    shape = shape_of(ts[0])
    return [with_shape(element_of(ts[0]), tuple(shape[i] for i in a.order))]


def _join(ts, _a):
    return [with_shape(element_of(ts[0]), shape_of(ts[0]) + (2,))]


def _split(ts, _a):
    t = with_shape(element_of(ts[0]), shape_of(ts[0])[:-1])
    return [t, t]


def _gather(ts, _a):
    return [with_shape(element_of(ts[0]), shape_of(ts[1]))]


def _load(ts, _a):
    pointee = element_of(ts[0]).pointee if isinstance(element_of(ts[0]), PointerType) else None
    return None if pointee is None else [with_element(ts[0], pointee)]


def _descriptor_block(ts, _a):
    return [ts[0].block_type] if ts and isinstance(ts[0], TensorDescType) else None


def _block_ptr_block(ts, _a):
    return [ts[0].block_type] if ts and isinstance(ts[0], BlockPtrType) else None


def _reduce(ts, a):
    out = []
    for t in ts:
        shape = list(shape_of(t))
        del shape[a.axis]
        out.append(with_shape(element_of(t), tuple(shape)))
    return out


def _scan(ts, _a):
    return list(ts)


def _dot(ts, _a):
    return [ts[2]]


def _local_load(ts, _a):
    buf = ts[0]
    return [TileType(tuple(buf.shape[1:]), buf.element)] if isinstance(buf, SmemType) else None


def _loop_results(ts, _a):
    return list(ts[3:])


def _while_results(ts, _a):
    return None  # the after-region's argument types decide; the verifier checks them


def _elementwise(npfn, llvm, operands=2, commutative=False, result=_same, attrs=None):
    return OpInfo(Kind.ELEMENTWISE, operands, numpy=npfn, llvm=llvm, commutative=commutative,
                  result=result, attrs=attrs)


def _unary_float(npfn, math_name):
    return _elementwise(npfn, {"float": f"math:{math_name}"}, operands=1)


OP_INFO: dict[Op, OpInfo] = {
    Op.CONSTANT: OpInfo(Kind.SOURCE, 0, attrs=A.ConstantAttrs),
    Op.PROGRAM_ID: OpInfo(Kind.SOURCE, 0, attrs=A.AxisAttrs, result=_scalar_i32,
                          llvm={"nvptx": "ctaid", "host": "arg"}),
    Op.NUM_PROGRAMS: OpInfo(Kind.SOURCE, 0, attrs=A.AxisAttrs, result=_scalar_i32,
                            llvm={"nvptx": "nctaid", "host": "arg"}),
    Op.ARANGE: OpInfo(Kind.SOURCE, 0, attrs=A.RangeAttrs, result=_arange),
    # smid: the index of the multiprocessor running this program (PTX `%smid`). Pure,
    # as in Triton: a CTA never moves to another SM, so two reads agree and may merge.
    Op.SMID: OpInfo(Kind.SOURCE, 0, result=_scalar_i32),
    # globaltimer: a nanosecond clock (PTX `%globaltimer`, i64). Not pure: every read
    # is a new sample, kept in program order, never merged or hoisted out of a loop.
    Op.GLOBALTIMER: OpInfo(Kind.SOURCE, 0, pure=False, result=_scalar_i64),

    Op.NEG: _elementwise(np.negative, {"sint": "sub0", "uint": "sub0", "float": "fneg"}, 1),
    Op.NOT: _elementwise(npo.bitwise_not, {"sint": "xor-1", "uint": "xor-1"}, 1),
    Op.ABS: _elementwise(np.abs, {"sint": "math:iabs", "uint": "identity", "float": "math:fabs"}, 1),
    Op.EXP: _unary_float(np.exp, "exp"),
    Op.EXP2: _unary_float(np.exp2, "exp2"),
    Op.LOG: _unary_float(np.log, "log"),
    Op.LOG2: _unary_float(np.log2, "log2"),
    Op.SIN: _unary_float(np.sin, "sin"),
    Op.COS: _unary_float(np.cos, "cos"),
    Op.SQRT: _unary_float(np.sqrt, "sqrt"),
    Op.SQRT_RN: _unary_float(np.sqrt, "sqrt_rn"),
    Op.RSQRT: _unary_float(npo.rsqrt, "rsqrt"),
    Op.ERF: _unary_float(npo.erf, "erf"),
    Op.CEIL: _unary_float(np.ceil, "ceil"),
    Op.FLOOR: _unary_float(np.floor, "floor"),

    Op.ADD: _elementwise(np.add, {"sint": "add", "uint": "add", "float": "fadd"}, commutative=True),
    Op.SUB: _elementwise(np.subtract, {"sint": "sub", "uint": "sub", "float": "fsub"}),
    Op.MUL: _elementwise(np.multiply, {"sint": "mul", "uint": "mul", "float": "fmul"}, commutative=True),
    Op.DIV: _elementwise(np.divide, {"float": "fdiv"}),
    Op.FDIV: _elementwise(np.divide, {"float": "fdiv_fast"}, attrs=A.FDivAttrs),
    Op.IDIV: _elementwise(npo.c_div, {"sint": "sdiv", "uint": "udiv"}),
    Op.REM: _elementwise(npo.c_rem, {"sint": "srem", "uint": "urem", "float": "frem"}),
    Op.AND: _elementwise(np.bitwise_and, {"sint": "and", "uint": "and"}, commutative=True),
    Op.OR: _elementwise(np.bitwise_or, {"sint": "or", "uint": "or"}, commutative=True),
    Op.XOR: _elementwise(np.bitwise_xor, {"sint": "xor", "uint": "xor"}, commutative=True),
    Op.SHL: _elementwise(npo.shift_left, {"sint": "shl", "uint": "shl"}),
    Op.SHR: _elementwise(npo.shift_right, {"sint": "ashr", "uint": "lshr"}),
    Op.MAXIMUM: _elementwise(npo.maximum, {"sint": "math:smax", "uint": "math:umax", "float": "math:fmax"},
                             commutative=True, attrs=A.NanAttrs),
    Op.MINIMUM: _elementwise(npo.minimum, {"sint": "math:smin", "uint": "math:umin", "float": "math:fmin"},
                             commutative=True, attrs=A.NanAttrs),
    Op.UMULHI: _elementwise(npo.umulhi, {"sint": "math:umulhi", "uint": "math:umulhi"}, commutative=True),
    Op.EQ: _elementwise(np.equal, {"sint": "icmp eq", "uint": "icmp eq", "float": "fcmp oeq", "ptr": "icmp eq"},
                        commutative=True, result=_compare),
    Op.NE: _elementwise(np.not_equal, {"sint": "icmp ne", "uint": "icmp ne", "float": "fcmp une", "ptr": "icmp ne"},
                        commutative=True, result=_compare),
    Op.LT: _elementwise(np.less, {"sint": "icmp slt", "uint": "icmp ult", "float": "fcmp olt", "ptr": "icmp ult"},
                        result=_compare),
    Op.LE: _elementwise(np.less_equal, {"sint": "icmp sle", "uint": "icmp ule", "float": "fcmp ole", "ptr": "icmp ule"},
                        result=_compare),
    Op.GT: _elementwise(np.greater, {"sint": "icmp sgt", "uint": "icmp ugt", "float": "fcmp ogt", "ptr": "icmp ugt"},
                        result=_compare),
    Op.GE: _elementwise(np.greater_equal,
                        {"sint": "icmp sge", "uint": "icmp uge", "float": "fcmp oge", "ptr": "icmp uge"},
                        result=_compare),
    Op.ADDPTR: _elementwise(None, {"ptr": "gep"}),

    Op.FMA: _elementwise(npo.fma, {"float": "math:fma"}, operands=3),
    Op.SELECT: _elementwise(np.where, {"sint": "select", "uint": "select", "float": "select", "ptr": "select"},
                            operands=3, result=_second),

    # the producer chooses the result type (the library's signature); operands may differ
    Op.EXTERN_ELEMENTWISE: OpInfo(Kind.ELEMENTWISE, VARIADIC, attrs=A.ExternAttrs, llvm={"any": "extern"}),
    # impure in the table (never merged or hoisted); removable when unused and is_pure
    # (`passes.ir_utils.has_side_effects`); lowered by the CUDA backend only
    Op.INLINE_ASM: OpInfo(Kind.ELEMENTWISE, VARIADIC, attrs=A.InlineAsmAttrs, pure=False),
    Op.CAST: OpInfo(Kind.ELEMENTWISE, 1, attrs=A.CastAttrs, llvm={"any": "convert"}),
    Op.BITCAST: OpInfo(Kind.ELEMENTWISE, 1, llvm={"any": "bitcast"}),
    Op.PTR_TO_INT: OpInfo(Kind.ELEMENTWISE, 1, llvm={"ptr": "ptrtoint"}),
    Op.INT_TO_PTR: OpInfo(Kind.ELEMENTWISE, 1, llvm={"sint": "inttoptr", "uint": "inttoptr"}),

    Op.SPLAT: OpInfo(Kind.SHAPE, 1),
    Op.BROADCAST: OpInfo(Kind.SHAPE, 1, attrs=A.ShapeAttrs, result=_shape_attr),
    Op.EXPAND_DIMS: OpInfo(Kind.SHAPE, 1, attrs=A.ExpandDimsAttrs, result=_expand_dims),
    Op.RESHAPE: OpInfo(Kind.SHAPE, 1, attrs=A.ShapeAttrs, result=_shape_attr),
    Op.PERMUTE: OpInfo(Kind.SHAPE, 1, attrs=A.PermuteAttrs, result=_permute),
    Op.JOIN: OpInfo(Kind.SHAPE, 2, result=_join),
    Op.SPLIT: OpInfo(Kind.SHAPE, 1, results=2, result=_split),
    # gather src, index -> a tile of the index's shape and the source's element type:
    # element i is src at i's coordinates with the one along `axis` replaced by
    # index[i]; an index outside [0, src.shape[axis]) gives 0 (false for bools)
    Op.GATHER: OpInfo(Kind.SHAPE, 2, attrs=A.GatherAttrs, result=_gather),

    Op.LOAD: OpInfo(Kind.MEMORY, VARIADIC, attrs=A.LoadAttrs, result=_load),
    Op.STORE: OpInfo(Kind.MEMORY, VARIADIC, results=0, attrs=A.StoreAttrs, pure=False, result=_none),
    # atomic_rmw ptr, val[, mask] -> the old values; atomic_cas ptr, cmp, val -> the old values
    Op.ATOMIC_RMW: OpInfo(Kind.MEMORY, VARIADIC, attrs=A.AtomicAttrs, pure=False, result=_second),
    Op.ATOMIC_CAS: OpInfo(Kind.MEMORY, 3, attrs=A.AtomicCasAttrs, pure=False, result=_third),

    # make_tensor_descriptor base, shape x n (i32), strides x n (i64) -> tensordesc<block>
    # (the producer states the type: block shape and padding are not in the operands);
    # descriptor_load desc, offsets x n (i32) -> the block at those coordinates, elements
    # outside the tensor read the padding; descriptor_store desc, offsets, value writes
    # the block's in-range part; descriptor_reduce likewise updates it atomically
    Op.MAKE_TENSOR_DESCRIPTOR: OpInfo(Kind.DESCRIPTOR, VARIADIC),
    Op.DESCRIPTOR_LOAD: OpInfo(Kind.MEMORY, VARIADIC, result=_descriptor_block),
    Op.DESCRIPTOR_STORE: OpInfo(Kind.MEMORY, VARIADIC, results=0, pure=False, result=_none),
    Op.DESCRIPTOR_REDUCE: OpInfo(Kind.MEMORY, VARIADIC, results=0, attrs=A.DescriptorReduceAttrs, pure=False,
                                 result=_none),

    # make_block_ptr base, shape x n (i64), strides x n (i64), offsets x n (i32) ->
    # blockptr<block, order> (the producer states the type); advance p, deltas x n (i32)
    # -> p moved by the deltas; block_load p -> the block at p's offsets (elements
    # outside the checked dimensions read the padding); block_store p, value writes
    # the block's part inside the checked dimensions. Their lowering is the pass
    # `block_pointers_to_pointers` (pointer tiles and masks), on every compiled backend.
    Op.MAKE_BLOCK_PTR: OpInfo(Kind.DESCRIPTOR, VARIADIC),
    Op.ADVANCE: OpInfo(Kind.DESCRIPTOR, VARIADIC, result=_same),
    Op.BLOCK_LOAD: OpInfo(Kind.MEMORY, 1, attrs=A.BlockLoadAttrs, result=_block_ptr_block),
    Op.BLOCK_STORE: OpInfo(Kind.MEMORY, 2, results=0, attrs=A.BlockStoreAttrs, pure=False, result=_none),

    Op.REDUCE: OpInfo(Kind.REDUCE, VARIADIC, results=VARIADIC, attrs=A.ReduceAttrs, result=_reduce, regions=1),
    Op.SCAN: OpInfo(Kind.REDUCE, VARIADIC, results=VARIADIC, attrs=A.ScanAttrs, result=_scan, regions=1),
    Op.DOT: OpInfo(Kind.DOT, 3, attrs=A.DotAttrs, result=_dot),

    Op.FOR: OpInfo(Kind.CONTROL, VARIADIC, results=VARIADIC, attrs=A.LoopAttrs, attrs_optional=True,
                   result=_loop_results, regions=1, pure=False),
    Op.IF: OpInfo(Kind.CONTROL, 1, results=VARIADIC, regions=2, pure=False),
    Op.WHILE: OpInfo(Kind.CONTROL, VARIADIC, results=VARIADIC, result=_while_results, regions=2, pure=False),
    Op.YIELD: OpInfo(Kind.CONTROL, VARIADIC, results=0, result=_none, terminator=True),
    Op.CONDITION: OpInfo(Kind.CONTROL, VARIADIC, results=0, result=_none, terminator=True),
    Op.RETURN: OpInfo(Kind.CONTROL, 0, results=0, result=_none, terminator=True, pure=False),

    # local_alloc -> a buffer (the producer picks its type); local_load buf, slot -> the
    # tile in slot `slot` (an i32 scalar) of the buffer; async_copy buf, slot, ptr[, mask]
    # copies the pointed-to elements into that slot, zero where masked off; commit closes
    # a group of copies, wait returns once at most `pending` recent groups are in flight;
    # local_dealloc ends a buffer's life (buffers are freed in the reverse order of
    # their allocation). Reads and writes of buffers are effects: none of these may be
    # moved or merged.
    Op.LOCAL_ALLOC: OpInfo(Kind.SHARED, 0, pure=False),
    Op.LOCAL_DEALLOC: OpInfo(Kind.SHARED, 1, results=0, pure=False, result=_none),
    Op.LOCAL_LOAD: OpInfo(Kind.SHARED, 2, pure=False, result=_local_load),
    Op.ASYNC_COPY: OpInfo(Kind.SHARED, VARIADIC, results=0, attrs=A.AsyncCopyAttrs, pure=False, result=_none),
    # local_copy src, src_slot, dst, dst_slot: the tile in slot `src_slot` of `src` written
    # into slot `dst_slot` of `dst` (the buffers' slots may lie in different layouts: a
    # row-major staging slot transposed into the K-major one an 8-bit wgmma reads);
    # every thread's writes are visible to the CTA, tensor cores included, after it
    Op.LOCAL_COPY: OpInfo(Kind.SHARED, 4, results=0, pure=False, result=_none),
    # local_store buf, slot, value: the tile `value` (computed in registers) written into
    # slot `slot` of `buf`, in the slot's layout; visible to the CTA, tensor cores
    # included, after it
    Op.LOCAL_STORE: OpInfo(Kind.SHARED, 3, results=0, pure=False, result=_none),
    Op.ASYNC_COMMIT: OpInfo(Kind.SHARED, 0, results=0, pure=False, result=_none),
    Op.ASYNC_WAIT: OpInfo(Kind.SHARED, 0, results=0, attrs=A.AsyncWaitAttrs, pure=False, result=_none),
    # dot_wait acc: the accumulator of an asynchronous dot (wgmma) once at most `pending`
    # more recent dots are in flight; the value itself is unchanged
    Op.DOT_WAIT: OpInfo(Kind.SHARED, 1, attrs=A.AsyncWaitAttrs, pure=False, result=_same),
    # tma_load buf, slot, bars, pred, desc, offsets...: when `pred` (an i1 scalar), the
    # descriptor's block at `offsets` is copied into slot `slot` of `buf` by the copy
    # engine (zero / NaN outside the tensor, as descriptor_load), its completion counted
    # on mbarrier `slot` of `bars` (an smem<Sx1xi64>); mbarrier_init bars readies every
    # slot's mbarrier for one arrival per phase; mbarrier_wait bars, slot, phase returns
    # once phase `phase` (0/1: its parity) of that mbarrier has completed, the copy's
    # data then visible; mbarrier_inval ends the mbarriers' life (before their bytes
    # are reused). Sequentially (the interpreter) copies complete at issue.
    Op.TMA_LOAD: OpInfo(Kind.SHARED, VARIADIC, results=0, attrs=A.TmaLoadAttrs, pure=False, result=_none),
    # tma_store buf, desc, offsets..., value: descriptor_store through a buffer of its own
    # (`store_buffers`: a store in a loop): the block is written into `buf` (an
    # smem<1 x block>) once the copy engine has read what the previous store left there,
    # then copied out by the copy engine, which may still be reading `buf` when the op
    # returns; bulk_wait {pending} returns once all but the `pending` most recent of
    # those copies have read their buffers (before a buffer is freed).
    Op.TMA_STORE: OpInfo(Kind.SHARED, VARIADIC, results=0, pure=False, result=_none),
    Op.BULK_WAIT: OpInfo(Kind.SHARED, 0, results=0, attrs=A.AsyncWaitAttrs, pure=False, result=_none),
    Op.MBARRIER_INIT: OpInfo(Kind.SHARED, 1, results=0, attrs=A.MbarrierInitAttrs, attrs_optional=True,
                             pure=False, result=_none),
    Op.MBARRIER_WAIT: OpInfo(Kind.SHARED, 3, results=0, attrs=A.MbarrierWaitAttrs, attrs_optional=True,
                             pure=False, result=_none),
    Op.MBARRIER_INVAL: OpInfo(Kind.SHARED, 1, results=0, pure=False, result=_none),
    # Warp specialization (tgir, sm_90a): `if warp_role` splits the kernel into a
    # producer partition (the then-region, run by the extra warps: TMA copies into the
    # rings) and the consumers (the else-region, the kernel's own warps); `mbarrier_arrive
    # bars, slot` is one arrival per warp executing it (a consumer releasing a slot)
    Op.MBARRIER_ARRIVE: OpInfo(Kind.SHARED, 2, results=0, pure=False, result=_none),
    Op.WARP_ROLE: OpInfo(Kind.SOURCE, 0, attrs=A.WarpRoleAttrs, pure=False, result=_scalar_i1),
    # warpgroup_turn {step, barrier, groups}: the consumer warpgroups' turns at issuing
    # their dots (ping-pong; A.WarpgroupTurnAttrs)
    Op.WARPGROUP_TURN: OpInfo(Kind.SHARED, 0, results=0, attrs=A.WarpgroupTurnAttrs, pure=False, result=_none),
    # convert_layout x: the same tile in the encoding its result type names (the
    # backend chooses how: a register renaming, a recomputation or a trip through
    # shared memory); no rule can infer that encoding, the result type states it
    Op.CONVERT_LAYOUT: OpInfo(Kind.LAYOUT, 1),
    # barrier: every thread of the program has reached this point and its shared-memory
    # accesses before it are visible after it (placed by the CUDA backend's barrier pass)
    Op.BARRIER: OpInfo(Kind.SHARED, 0, results=0, pure=False, result=_none),

    Op.DEVICE_PRINT: OpInfo(Kind.META, VARIADIC, results=0, attrs=A.PrintAttrs, pure=False, result=_none),
    Op.DEVICE_ASSERT: OpInfo(Kind.META, 1, results=0, attrs=A.AssertAttrs, pure=False, result=_none),
    Op.DEBUG_BARRIER: OpInfo(Kind.META, 0, results=0, pure=False, result=_none),
    # gdc_wait: wait until the grids this one depends on have completed and their memory
    # is visible; gdc_launch_dependents: let dependent grids start (a scheduling hint)
    Op.GDC_WAIT: OpInfo(Kind.META, 0, results=0, pure=False, result=_none),
    Op.GDC_LAUNCH_DEPENDENTS: OpInfo(Kind.META, 0, results=0, pure=False, result=_none),
    Op.ASSUME: OpInfo(Kind.META, 1, results=0, pure=False, result=_none),
    Op.HINT: OpInfo(Kind.META, 1, attrs=A.HintAttrs, result=_same),
}

OP_BY_NAME = {op.value: op for op in Op}

# ops that exist only in the backend stage `tgir` (target-independent passes and the
# interpreter-first stages never see them)
TGIR_ONLY = frozenset(op for op, row in OP_INFO.items() if row.kind in (Kind.SHARED, Kind.LAYOUT))

DESCRIPTOR_OPS = frozenset({Op.MAKE_TENSOR_DESCRIPTOR, Op.DESCRIPTOR_LOAD, Op.DESCRIPTOR_STORE,
                            Op.DESCRIPTOR_REDUCE})

BLOCK_POINTER_OPS = frozenset({Op.MAKE_BLOCK_PTR, Op.ADVANCE, Op.BLOCK_LOAD, Op.BLOCK_STORE})

# ops that write global memory
MEMORY_WRITES = frozenset({Op.STORE, Op.ATOMIC_RMW, Op.ATOMIC_CAS, Op.DESCRIPTOR_STORE, Op.DESCRIPTOR_REDUCE,
                           Op.BLOCK_STORE, Op.TMA_STORE})

COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})


def info(op: Op) -> OpInfo:
    return OP_INFO[op]


def type_class(t: Type) -> str:
    """The key into `OpInfo.llvm`: `sint`, `uint`, `float` or `ptr` (i1 counts as uint)."""
    e = element_of(t)
    if isinstance(e, PointerType):
        return "ptr"
    if e.is_float:
        return "float"
    return "sint" if e.is_signed else "uint"


assert set(OP_INFO) == set(Op), "every Op needs a row in OP_INFO"
