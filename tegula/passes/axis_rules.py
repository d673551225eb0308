"""Transfer rules of axis analysis: the `AxisInfo` of an instruction's results from
those of its operands (definitions in `axis_info`). Control flow is the driver's
(`axis_analysis`); here every rule sees one instruction.

Every rule is sound for any runtime values matching the operands' facts; where a case
is not worked out the rule says less (constancy only, or nothing). The reasoning
behind the less obvious ones:
- runs survive `+`/`-` of a value constant over the run; a sum's run blocks start at
  sums of block starts, so divisibility is the smaller of the operands' divisibility
  at those starts (`block_divisibility`);
- a product, shift or bitwise op of runs is not a run: only element divisibility is
  kept; a known constant factor 1 keeps everything;
- `x < m`, `x >= m` (and `m <= x`, `m > x`) for a run x and a block-constant m are
  constant on aligned blocks of length g when both the run's starts and m are
  multiples of g: no multiple of g lies strictly inside such a block, so the boundary
  m never splits one (this is what makes `offsets < n` masks vectorizable);
- likewise `x // m`, `x % m` (m block-constant, x >= 0) do not change within such
  blocks (`//`) or keep the run (`%`), and `x >> k` is constant on aligned runs of
  length up to 2**k. Signed truncating division needs x >= 0, hence `nonnegative`.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from ..ir.core import Instr, Value
from ..ir.ops import COMPARISONS, OP_INFO, Kind, Op
from ..ir.types import PointerType, ScalarType, element_of, shape_of
from .axis_info import (
    MAX_DIVISIBILITY,
    AxisInfo,
    dims,
    element_unit,
    make,
    pow2_divisor,
    uniform,
    unknown,
)
from .const_fold import canonical_literal, fold

Infos = list[AxisInfo]


def _shape(ins: Instr) -> tuple[int, ...]:
    return shape_of(ins.results[0].type)


def _scalar(ins: Instr) -> Optional[ScalarType]:
    e = element_of(ins.results[0].type)
    return e if isinstance(e, ScalarType) else None


def _is_intlike(ins: Instr) -> bool:
    """Integer or pointer results: the values divisibility and contiguity talk about."""
    e = element_of(ins.results[0].type)
    return isinstance(e, PointerType) or (isinstance(e, ScalarType) and e.is_int and not e.is_bool)


def _operand_is_intlike(ins: Instr, i: int) -> bool:
    e = element_of(ins.operands[i].type)
    return isinstance(e, PointerType) or (isinstance(e, ScalarType) and e.is_int and not e.is_bool)


def _min_constancy(ins: Instr, args: Infos) -> tuple[int, ...]:
    n = len(dims(_shape(ins)))
    same = [a.constancy for a in args if a.rank == n]
    return tuple(min(c[d] for c in same) for d in range(n)) if same else (1,) * n


def constancy_only(ins: Instr, args: Infos) -> AxisInfo:
    """Any elementwise function is constant where all its operands are."""
    n = len(dims(_shape(ins)))
    return make(_shape(ins), (1,) * n, (1,) * n, _min_constancy(ins, args))


def aligned_run(x: AxisInfo, m: AxisInfo, d: int, unit: int = 1) -> int:
    """The largest g such that x is a run and m constant on aligned blocks of length g
    along d, with x's block starts and m's value multiples of g (in units of `unit`
    bytes for pointers): see the module docstring."""
    g = min(x.contiguity[d], m.constancy[d])
    while g > 1 and (x.block_divisibility(d, g, unit) < g * unit
                     or m.block_divisibility(d, g, unit) < g * unit):
        g //= 2
    return g


def _elementwise_div(ins: Instr, args: Infos, div: int, nonnegative: bool = False) -> AxisInfo:
    """No runs, constancy of the operands, every element divisible by `div`."""
    n = len(dims(_shape(ins)))
    return make(_shape(ins), (div,) * n, (1,) * n, _min_constancy(ins, args),
                nonnegative=nonnegative)


# ------------------------------------------------------------------ sources

def _constant(ins: Instr, args: Infos) -> AxisInfo:
    st = _scalar(ins)
    if st is not None and st.is_int:
        return make(_shape(ins), (), (), (), constant=int(canonical_literal(ins.attrs.value, st)))
    size = dims(_shape(ins))
    return make(_shape(ins), (1,) * len(size), (1,) * len(size), size)


def _program_id(ins: Instr, args: Infos) -> AxisInfo:
    return uniform((), 1, nonnegative=True)


def _arange(ins: Instr, args: Infos) -> AxisInfo:
    n = ins.attrs.end - ins.attrs.start
    return make((n,), (pow2_divisor(ins.attrs.start),), (n,), (1,),
                nonnegative=ins.attrs.start >= 0)


# ------------------------------------------------------------------ arithmetic

def _add_sub(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    a, b = args
    unit = element_unit(ins.results[0])
    is_ptr = ins.op is Op.ADDPTR
    contig, div = [], []
    for d in range(a.rank):
        k = min(a.contiguity[d], b.constancy[d])
        if ins.op is not Op.SUB:
            k = max(k, min(a.constancy[d], b.contiguity[d]))
        # an offset's divisibility counts elements: scale it to bytes
        b_div = b.block_divisibility(d, k) * unit if is_ptr else b.block_divisibility(d, k, unit)
        contig.append(k)
        div.append(min(a.block_divisibility(d, k, unit), b_div))
    const = tuple(map(min, a.constancy, b.constancy))
    nonneg = ins.op is Op.ADD and a.nonnegative and b.nonnegative
    return make(_shape(ins), div, contig, const, nonnegative=nonneg, unit=unit)


def _mul(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    a, b = args
    if a.constant == 1:
        return b
    if b.constant == 1:
        return a
    if 0 in (a.constant, b.constant):
        return make(_shape(ins), (), (), (), constant=0)
    return _elementwise_div(ins, args, a.element_divisibility() * b.element_divisibility(),
                            a.nonnegative and b.nonnegative)


def _idiv(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    a, b = args
    if b.constant == 1:
        return a
    div = 1
    c = b.constant
    if c is not None and c != 0 and abs(c) & (abs(c) - 1) == 0 and a.element_divisibility() >= abs(c):
        div = a.element_divisibility() // abs(c)  # exact division by a power of two
    # x // 0 is -1 in the IR: the quotient is known >= 0 only for a known nonzero divisor
    nonneg = a.nonnegative and b.nonnegative and c is not None and c != 0
    info = _elementwise_div(ins, args, div, nonneg)
    if a.nonnegative:
        const = [max(info.constancy[d], aligned_run(a, b, d)) for d in range(a.rank)]
        info = make(_shape(ins), info.divisibility, info.contiguity, const, nonnegative=info.nonnegative)
    return info


def _rem(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    a, b = args
    c = b.constant
    if c is not None and c != 0 and abs(c) & (abs(c) - 1) == 0 and a.element_divisibility() >= abs(c):
        return make(_shape(ins), (), (), (), constant=0)
    # r = a - q*b: divisible by whatever divides both
    info = _elementwise_div(ins, args, min(a.element_divisibility(), b.element_divisibility()),
                            a.nonnegative)
    # An aligned run of a stays a run of a % b. That needs a >= 0 (C's remainder of a
    # negative run restarts at 0 from below); like Triton, tegula assumes it of index
    # arithmetic whose sign it cannot prove, e.g. the tutorial matmul's
    # `(pid_n * BLOCK_N + arange) % N`, where pid_n comes out of a division by a
    # runtime value. (The result's own sign is claimed only when a's is known.)
    div, contig = list(info.divisibility), list(info.contiguity)
    for d in range(a.rank):
        g = aligned_run(a, b, d)
        if g > 1:
            contig[d] = g
            div[d] = min(a.block_divisibility(d, g), b.block_divisibility(d, g))
    return make(_shape(ins), div, contig, info.constancy, nonnegative=a.nonnegative)


def _shift_amount(ins: Instr, b: AxisInfo) -> Optional[int]:
    st = _scalar(ins)
    if b.constant is None or st is None or not 0 <= b.constant < st.bits:
        return None
    return b.constant


def _shl(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    a, b = args
    k = _shift_amount(ins, b)
    if k == 0:
        return a
    ed = a.element_divisibility()
    # shifting left only appends zero bits (a shift past the width gives 0)
    return _elementwise_div(ins, args, min(ed << k, MAX_DIVISIBILITY) if k is not None else ed)


def _shr(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    a, b = args
    k = _shift_amount(ins, b)
    if k is None:
        return constancy_only(ins, args)
    if k == 0:
        return a
    info = _elementwise_div(ins, args, max(1, a.element_divisibility() >> k), a.nonnegative)
    const = list(info.constancy)
    for d in range(a.rank):
        # floor division by 2**k: constant on aligned runs no longer than 2**k
        g = min(a.contiguity[d], 1 << k)
        while g > 1 and a.block_divisibility(d, g) < g:
            g //= 2
        const[d] = max(const[d], g)
    return make(_shape(ins), info.divisibility, info.contiguity, const, nonnegative=a.nonnegative)


def _bitwise(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return constancy_only(ins, args)
    a, b = args
    ea, eb = a.element_divisibility(), b.element_divisibility()
    if ins.op is Op.AND:  # trailing zeros of either operand stay zero
        return _elementwise_div(ins, args, max(ea, eb), a.nonnegative or b.nonnegative)
    return _elementwise_div(ins, args, min(ea, eb), a.nonnegative and b.nonnegative)


def _min_max(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    a, b = args
    nonneg = (a.nonnegative or b.nonnegative) if ins.op is Op.MAXIMUM else (a.nonnegative and b.nonnegative)
    return _elementwise_div(ins, args, min(a.element_divisibility(), b.element_divisibility()), nonneg)


def _neg_abs(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    if not _is_intlike(ins):
        return None
    return _elementwise_div(ins, args, args[0].element_divisibility())


def _compare(ins: Instr, args: Infos) -> AxisInfo:
    info = constancy_only(ins, args)
    if not _operand_is_intlike(ins, 0):
        return info
    a, b = args
    unit = element_unit(ins.operands[0])
    const = list(info.constancy)
    for d in range(len(const)):
        if ins.op in (Op.LT, Op.GE):      # run on the left, boundary at b
            const[d] = max(const[d], aligned_run(a, b, d, unit))
        elif ins.op in (Op.LE, Op.GT):    # b <= a == a >= b, b > a == a < b: run on the right
            const[d] = max(const[d], aligned_run(b, a, d, unit))
    return make(_shape(ins), info.divisibility, info.contiguity, const)


def _select(ins: Instr, args: Infos) -> AxisInfo:
    c, a, b = args
    if c.constant is not None:
        return a if c.constant else b
    if not _is_intlike(ins):
        return constancy_only(ins, args)
    unit = element_unit(ins.results[0])
    contig = tuple(min(c.constancy[d], a.contiguity[d], b.contiguity[d]) for d in range(a.rank))
    div = [min(a.block_divisibility(d, k, unit), b.block_divisibility(d, k, unit))
           for d, k in enumerate(contig)]
    const = tuple(min(c.constancy[d], a.constancy[d], b.constancy[d]) for d in range(a.rank))
    return make(_shape(ins), div, contig, const, nonnegative=a.nonnegative and b.nonnegative,
                unit=unit)


# ------------------------------------------------------------------ conversions

def _cast(ins: Instr, args: Infos) -> AxisInfo:
    a = args[0]
    src, dst = element_of(ins.operands[0].type), element_of(ins.results[0].type)
    ints = all(isinstance(t, ScalarType) and t.is_int for t in (src, dst))
    if not ints or dst.is_bool:
        return constancy_only(ins, args)
    if src.is_bool:
        return _elementwise_div(ins, args, 1, nonnegative=True)
    # integer conversions wrap at multiples of 2**bits: aligned runs never straddle them
    if ins.op is Op.CAST:
        same_width_kind = dst.bits == src.bits and src.is_signed == dst.is_signed
        nonneg = a.nonnegative and (dst.bits > src.bits or same_width_kind)
    else:
        nonneg = a.nonnegative and src.is_signed and dst.is_signed
    return make(_shape(ins), a.divisibility, a.contiguity, a.constancy, nonnegative=nonneg)


def _pointer_conversion(ins: Instr, args: Infos) -> AxisInfo:
    """bitcast between pointers, ptr_to_int, int_to_ptr: the byte address is kept; runs
    are counted in elements, so they survive only when the element size does."""
    a = args[0]
    src_unit, dst_unit = element_unit(ins.operands[0]), element_unit(ins.results[0])
    contig = a.contiguity if src_unit == dst_unit else (1,) * a.rank
    return make(_shape(ins), a.divisibility, contig, a.constancy, unit=dst_unit)


def _bitcast(ins: Instr, args: Infos) -> AxisInfo:
    src, dst = element_of(ins.operands[0].type), element_of(ins.results[0].type)
    if isinstance(src, PointerType) and isinstance(dst, PointerType):
        return _pointer_conversion(ins, args)
    return _cast(ins, args)


# ------------------------------------------------------------------ shapes

def _splat(ins: Instr, args: Infos) -> AxisInfo:
    a = args[0]
    if a.constant is not None:
        return make(_shape(ins), (), (), (), constant=a.constant)
    return uniform(_shape(ins), a.element_divisibility(element_unit(ins.operands[0])), a.nonnegative)


def _broadcast(ins: Instr, args: Infos) -> AxisInfo:
    a = args[0]
    src, dst = shape_of(ins.operands[0].type), _shape(ins)
    if not src or len(src) != len(dst):
        return _splat(ins, args)
    every = a.element_divisibility(element_unit(ins.operands[0]))
    div, contig, const = list(a.divisibility), list(a.contiguity), list(a.constancy)
    for d, (s, n) in enumerate(zip(src, dst)):
        if s != n:  # a stretched size-1 dimension: constant along it
            div[d], contig[d], const[d] = every, 1, n
    return make(dst, div, contig, const, a.constant, a.nonnegative, element_unit(ins.results[0]))


def _map_dims(ins: Instr, a: AxisInfo, mapping: list[Optional[int]]) -> AxisInfo:
    """Result dimension i takes operand dimension mapping[i]; None marks a new size-1
    dimension (which has the facts shared by every element)."""
    if a.constant is not None:
        return make(_shape(ins), (), (), (), constant=a.constant)
    every = a.element_divisibility(element_unit(ins.operands[0]))
    pick = [(a.divisibility[m], a.contiguity[m], a.constancy[m]) if m is not None else (every, 1, 1)
            for m in mapping]
    return make(_shape(ins), [p[0] for p in pick], [p[1] for p in pick], [p[2] for p in pick],
                nonnegative=a.nonnegative, unit=element_unit(ins.results[0]))


def _expand_dims(ins: Instr, args: Infos) -> AxisInfo:
    src = shape_of(ins.operands[0].type)
    if not src:
        return _map_dims(ins, args[0], [0])
    axis = ins.attrs.axis % (len(src) + 1)
    mapping: list[Optional[int]] = list(range(len(src)))
    mapping.insert(axis, None)
    return _map_dims(ins, args[0], mapping)


def _permute(ins: Instr, args: Infos) -> AxisInfo:
    return _map_dims(ins, args[0], list(ins.attrs.order))


def _reshape(ins: Instr, args: Infos) -> AxisInfo:
    a = args[0]
    src, dst = dims(shape_of(ins.operands[0].type)), dims(_shape(ins))
    big_src = [d for d, n in enumerate(src) if n > 1]
    big_dst = [d for d, n in enumerate(dst) if n > 1]
    if [src[d] for d in big_src] == [dst[d] for d in big_dst]:
        # only size-1 dimensions come or go: the others keep their facts
        mapping: list[Optional[int]] = [None] * len(dst)
        for s, t in zip(big_src, big_dst):
            mapping[t] = s
        return _map_dims(ins, a, mapping)
    every = a.element_divisibility(element_unit(ins.operands[0]))
    # a general reshape scatters runs; only "the same everywhere" survives it
    const = dst if a.constancy == src else (1,) * len(dst)
    return make(_shape(ins), (every,) * len(dst), (1,) * len(dst), const, a.constant,
                a.nonnegative, element_unit(ins.results[0]))


def _join(ins: Instr, args: Infos) -> AxisInfo:
    a, b = args
    unit = element_unit(ins.results[0])
    contig = [min(x, y) for x, y in zip(a.contiguity, b.contiguity)]
    div = [min(a.block_divisibility(d, k, unit), b.block_divisibility(d, k, unit))
           for d, k in enumerate(contig)]
    const = [min(x, y) for x, y in zip(a.constancy, b.constancy)]
    if not shape_of(ins.operands[0].type):
        div, contig, const = [], [], []
    every = min(a.element_divisibility(unit), b.element_divisibility(unit))
    return make(_shape(ins), div + [every], contig + [1], const + [1],
                nonnegative=a.nonnegative and b.nonnegative, unit=unit)


def _split(ins: Instr, args: Infos) -> list[AxisInfo]:
    a = args[0]
    rank = len(shape_of(ins.operands[0].type))
    out = _map_dims(ins, a, [None] if rank == 1 else list(range(rank - 1)))
    return [out, out]


# The kind of `hint` the compiler itself emits for a divisibility that holds by
# construction (a tensor descriptor's base is 16-byte aligned and its outer strides are
# multiples of 16 bytes: `descriptors_to_pointers`). Unlike the user's `multiple_of` it
# only ever raises what the analysis found, and it speaks for its result alone (the
# fact holds where the descriptor is used, not wherever its operand is).
KNOWN_MULTIPLE_OF = "known_multiple_of"


def apply_hint(info: AxisInfo, hint: Instr, value: Value) -> AxisInfo:
    """`info` of `value` with the claim of the `hint` instruction (whose operand or result
    `value` is) put in place of what the analysis found, as Triton does. A hint whose
    values do not match the rank (a scalar's one value is spread) or of unknown kind
    leaves `info` alone."""
    values = tuple(hint.attrs.values)
    if len(values) != info.rank:
        values = (values[0],) * info.rank if len(values) == 1 else ()
    if values and hint.attrs.kind == KNOWN_MULTIPLE_OF:  # a guarantee: raises, never lowers
        values = tuple(max(int(v), d) for v, d in zip(values, info.divisibility))
    field = {"multiple_of": "divisibility", "max_contiguous": "contiguity", "max_constancy": "constancy",
             KNOWN_MULTIPLE_OF: "divisibility"}.get(hint.attrs.kind)
    if not values or field is None:
        return info
    hinted = replace(info, **{field: tuple(max(1, int(v)) for v in values)})
    return make(shape_of(value.type), hinted.divisibility, hinted.contiguity, hinted.constancy,
                hinted.constant, hinted.nonnegative, element_unit(value))


def _hint(ins: Instr, args: Infos) -> AxisInfo:
    """The user's claim replaces what the analysis found (as in Triton)."""
    return apply_hint(args[0], ins, ins.results[0])


def _same_as_operand(ins: Instr, args: Infos) -> AxisInfo:
    """`convert_layout` moves values between threads, it does not change them."""
    return args[0]


# ------------------------------------------------------------------ dispatch

Rule = Callable[[Instr, Infos], object]

_RULES: dict[Op, Rule] = {
    Op.CONSTANT: _constant, Op.PROGRAM_ID: _program_id, Op.NUM_PROGRAMS: _program_id,
    Op.ARANGE: _arange,
    Op.ADD: _add_sub, Op.SUB: _add_sub, Op.ADDPTR: _add_sub, Op.MUL: _mul,
    Op.IDIV: _idiv, Op.REM: _rem, Op.SHL: _shl, Op.SHR: _shr,
    Op.AND: _bitwise, Op.OR: _bitwise, Op.XOR: _bitwise,
    Op.MAXIMUM: _min_max, Op.MINIMUM: _min_max, Op.NEG: _neg_abs, Op.ABS: _neg_abs,
    Op.SELECT: _select, Op.CAST: _cast, Op.BITCAST: _bitcast,
    Op.PTR_TO_INT: _pointer_conversion, Op.INT_TO_PTR: _pointer_conversion,
    Op.SPLAT: _splat, Op.BROADCAST: _broadcast, Op.EXPAND_DIMS: _expand_dims,
    Op.PERMUTE: _permute, Op.RESHAPE: _reshape, Op.JOIN: _join, Op.SPLIT: _split,
    Op.HINT: _hint, Op.CONVERT_LAYOUT: _same_as_operand,
    **{op: _compare for op in COMPARISONS},
}


def _folded(ins: Instr, args: Infos) -> Optional[AxisInfo]:
    """All operands known integers: evaluate through the op table."""
    st = _scalar(ins)
    if (st is None or not st.is_int or len(ins.results) != 1 or not ins.operands
            or any(a.constant is None for a in args)):
        return None
    if any(not isinstance(element_of(v.type), ScalarType) for v in ins.operands):
        return None
    value = fold(ins.op, ins.attrs, [v.type for v in ins.operands], [a.constant for a in args],
                 ins.results[0].type)
    return None if value is None else make(_shape(ins), (), (), (), constant=int(value))


def transfer(ins: Instr, args: Infos) -> list[AxisInfo]:
    """The AxisInfo of each result of `ins`, given its operands' (non-control ops)."""
    if not ins.results:
        return []
    folded = _folded(ins, args)
    if folded is not None:
        return [folded]
    rule = _RULES.get(ins.op)
    out = rule(ins, args) if rule is not None else None
    if isinstance(out, AxisInfo):
        return [out]
    if out is not None:
        return list(out)
    # inline assembly is a black box: it may read %laneid or a clock, so equal operands
    # do not make equal results
    if OP_INFO[ins.op].kind is Kind.ELEMENTWISE and len(ins.results) == 1 and ins.op is not Op.INLINE_ASM:
        return [constancy_only(ins, args)]
    return [unknown(shape_of(r.type)) for r in ins.results]
