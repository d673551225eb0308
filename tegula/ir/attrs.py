"""Typed attribute records of IR instructions, one small frozen dataclass per need.

Instructions never carry positional tuples of settings: each op that has settings names
its attribute class in the op table (`ops.OP_INFO[op].attrs`), and the printer/parser
write and read the fields by name.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional


@dataclass(frozen=True)
class ConstantAttrs:
    """A literal: a Python bool/int/float (splatted when the result is a tile)."""

    value: Any


@dataclass(frozen=True)
class AxisAttrs:
    """program_id / num_programs: the grid axis (0, 1, 2)."""

    axis: int


@dataclass(frozen=True)
class RangeAttrs:
    """arange: the half-open interval [start, end)."""

    start: int
    end: int


@dataclass(frozen=True)
class CastAttrs:
    """cast: the rounding of float narrowing (`rtne` by default, or `rtz`)."""

    rounding: str = "rtne"


@dataclass(frozen=True)
class NanAttrs:
    """maximum / minimum / clamp: whether a NaN operand propagates (else it is ignored)."""

    propagate_nan: bool = False


@dataclass(frozen=True)
class ShapeAttrs:
    """broadcast / reshape: the result shape (reshape may reorder when allowed)."""

    shape: tuple[int, ...]
    can_reorder: bool = False


@dataclass(frozen=True)
class ExpandDimsAttrs:
    axis: int


@dataclass(frozen=True)
class PermuteAttrs:
    order: tuple[int, ...]


@dataclass(frozen=True)
class GatherAttrs:
    """gather: the axis (of source and index alike) along which the index picks."""

    axis: int


@dataclass(frozen=True)
class LoadAttrs:
    """load: which optional operands (mask, other) are present, and cache hints."""

    has_mask: bool = False
    has_other: bool = False
    cache_modifier: str = ""
    eviction_policy: str = ""
    volatile: bool = False


@dataclass(frozen=True)
class StoreAttrs:
    """store: whether a mask operand is present, and cache hints."""

    has_mask: bool = False
    cache_modifier: str = ""
    eviction_policy: str = ""


@dataclass(frozen=True)
class AtomicAttrs:
    """atomic_rmw: the operation (`add`, `fadd`, `max`, `min`, `and`, `or`, `xor`,
    `xchg`; max/min compare signed or unsigned by the value's type), whether a mask
    operand is present, the memory semantic (`acq_rel`, `acquire`, `release`,
    `relaxed`) and the scope (`gpu`, `cta`, `sys`)."""

    kind: str = "add"
    has_mask: bool = False
    sem: str = "acq_rel"
    scope: str = "gpu"


@dataclass(frozen=True)
class AtomicCasAttrs:
    """atomic_cas: the memory semantic and scope (as `AtomicAttrs`)."""

    sem: str = "acq_rel"
    scope: str = "gpu"


ATOMIC_KINDS = ("add", "fadd", "max", "min", "and", "or", "xor", "xchg")
ATOMIC_SEMS = ("acq_rel", "acquire", "release", "relaxed")
ATOMIC_SCOPES = ("gpu", "cta", "sys")


@dataclass(frozen=True)
class ReduceAttrs:
    axis: int


@dataclass(frozen=True)
class ScanAttrs:
    axis: int
    reverse: bool = False


@dataclass(frozen=True)
class DotAttrs:
    """dot: `tf32`, `tf32x3` or `ieee` for f32 operands (the frontend rewrites `bf16x3` and
    `bf16x6` into bf16 dots); imprecise accumulation cap."""

    input_precision: str = "ieee"
    max_num_imprecise_acc: Optional[int] = None


@dataclass(frozen=True)
class PrintAttrs:
    prefix: str
    hex: bool = False


@dataclass(frozen=True)
class AssertAttrs:
    message: str


@dataclass(frozen=True)
class HintAttrs:
    """multiple_of / max_contiguous / max_constancy hints, one value per dimension."""

    kind: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class FDivAttrs:
    """fdiv: IEEE round-to-nearest (True) or the fast approximate division (False)."""

    ieee_rounding: bool = False


@dataclass(frozen=True)
class ExternAttrs:
    """extern_elementwise: the library function applied element by element (a libdevice
    `__nv_*` symbol), and whether it is pure (free of side effects)."""

    symbol: str
    pure: bool = True


@dataclass(frozen=True)
class InlineAsmAttrs:
    """inline_asm_elementwise: the assembly text and its LLVM constraint string
    (outputs first, then inputs: a register per `pack` elements of each, elements
    narrower than 32 bits packed into 32-bit registers), how many elements one
    execution handles, whether it is free of side effects, the dtypes of all its
    outputs, and which output this op's result is (a call with several outputs is one
    op per output, each running the assembly: see `language/inline_asm.py`)."""

    asm: str
    constraints: str
    pack: int
    is_pure: bool
    outputs: tuple
    index: int = 0


@dataclass(frozen=True)
class LoopAttrs:
    """for: `tl.range`'s scheduling hints, kept for the backend's loop passes. None /
    False mean "not given": the backend uses its defaults (the launch's `num_stages`).
    The text form lists only the hints given (as for every attribute record)."""

    num_stages: Optional[int] = None
    loop_unroll_factor: Optional[int] = None
    warp_specialize: bool = False
    flatten: bool = False
    disallow_acc_multi_buffer: bool = False
    disable_licm: bool = False


@dataclass(frozen=True)
class AsyncCopyAttrs:
    """async_copy: whether a mask operand follows the pointers (masked-off elements of
    the destination are zero-filled), and whether an `index` and a `bound` tile follow
    it (`has_bound`): then element e is copied only where also `index[e] < bound[e]`.
    The bound is the mask's term along the contiguous dimension kept apart (a block's
    `k0 + j < K`), so that a copy along a run can take its source size from it.
    `through_registers`: the issuing threads load the tile with vector loads and store
    it into the slot themselves, instead of an asynchronous copy engine (cp.async/TMA)
    doing it; the copy is then complete at the next barrier, not at a wait."""

    has_mask: bool = False
    has_bound: bool = False
    through_registers: bool = False


@dataclass(frozen=True)
class AsyncWaitAttrs:
    """async_wait: how many of the most recently committed copy groups may still be in
    flight when the wait returns (every older group has landed)."""

    pending: int = 0


@dataclass(frozen=True)
class DescriptorReduceAttrs:
    """descriptor_reduce: the update applied to each element of the block (`add`, `min`,
    `max`, `and`, `or`, `xor`; min/max compare signed or unsigned by the element type),
    atomically per element, relaxed, at GPU scope (as Triton's descriptor atomics)."""

    kind: str = "add"


@dataclass(frozen=True)
class BlockLoadAttrs:
    """block_load: the dimensions bounds-checked (`boundary_check`, sorted, each once),
    what the elements outside them read (`padding`: "zero", or "nan" for floats; only
    meaningful when some dimension is checked), and the load's cache hints."""

    boundary_check: tuple[int, ...] = ()
    padding: str = "zero"
    cache_modifier: str = ""
    eviction_policy: str = ""
    volatile: bool = False


@dataclass(frozen=True)
class BlockStoreAttrs:
    """block_store: the dimensions bounds-checked (elements outside them are not
    written) and the store's cache hints."""

    boundary_check: tuple[int, ...] = ()
    cache_modifier: str = ""
    eviction_policy: str = ""


@dataclass(frozen=True)
class TmaLoadAttrs:
    """tma_load: whether the slot holds the transpose of the descriptor's block (the
    load fed a dot through `.T`; the copy itself writes the block, the slot's layout
    reads it transposed)."""

    transposed: bool = False


@dataclass(frozen=True)
class MbarrierInitAttrs:
    """mbarrier_init: the arrivals that complete each phase of every slot's mbarrier
    (a TMA ring's: 1, the issuing thread's `expect_tx`; a warp-specialized ring's
    `empty` barriers: one per consumer warp, see `mbarrier_arrive`)."""

    count: int = 1


@dataclass(frozen=True)
class MbarrierWaitAttrs:
    """mbarrier_wait: `issuer_only` — only the thread that issues the TMA copies waits
    (a TMA ring whose slots every warp releases by arrival: the other warps run on,
    instead of meeting at a CTA barrier each iteration); else every thread waits."""

    issuer_only: bool = False


@dataclass(frozen=True)
class WarpRoleAttrs:
    """warp_role: the producer partition of a warp-specialized kernel is `producer_warps`
    warps after the kernel's `num_warps` (the consumers, which the layouts cover); each
    partition re-sizes its registers per thread (`setmaxnreg`) when its numbers are
    non-zero."""

    producer_warps: int = 4
    producer_registers: int = 0
    consumer_registers: int = 0


@dataclass(frozen=True)
class WarpgroupTurnAttrs:
    """warpgroup_turn: the consumer warpgroups of a warp-specialized loop take turns
    issuing their dots (FlashAttention-3's ping-pong), through the named barriers
    `barrier` .. `barrier + groups - 1`, warpgroup g waiting at `barrier + g` for the
    turn the previous one passes it. `step`: "begin" (before the loop, the last
    warpgroup passes the first turn), "wait" (before the iteration's first dot), "pass"
    (after its last dot is issued), "end" (after the loop, the first warpgroup takes the
    turn passed after the last iteration, so every barrier ends balanced)."""

    step: str
    barrier: int
    groups: int


TURN_STEPS = ("begin", "wait", "pass", "end")


DESCRIPTOR_REDUCE_KINDS = ("add", "min", "max", "and", "or", "xor")


def attr_fields(attrs: Any) -> list[tuple[str, Any]]:
    """(name, value) pairs of an attribute record, in declaration order."""
    return [(f.name, getattr(attrs, f.name)) for f in fields(attrs)]


ATTR_CLASSES = {
    cls.__name__: cls
    for cls in (
        ConstantAttrs, AxisAttrs, RangeAttrs, CastAttrs, NanAttrs, ShapeAttrs,
        ExpandDimsAttrs, PermuteAttrs, GatherAttrs, LoadAttrs, StoreAttrs, ReduceAttrs, ScanAttrs,
        DotAttrs, PrintAttrs, AssertAttrs, HintAttrs, FDivAttrs, LoopAttrs, AsyncCopyAttrs,
        AsyncWaitAttrs, DescriptorReduceAttrs, TmaLoadAttrs, BlockLoadAttrs, BlockStoreAttrs,
        MbarrierInitAttrs, MbarrierWaitAttrs, WarpRoleAttrs,
    )
}
