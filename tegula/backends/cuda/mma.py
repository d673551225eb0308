"""Which tensor-core instruction computes a `dot`, and how its warps tile the result.

`choose_mma(ins, num_warps, capability)` returns an `MmaChoice` for a 2-D dot that
`mma.sync` (sm_80+) can compute, or None when the dot stays on the FMA path:
- f16 x f16 and bf16 x bf16 with an f32 accumulator: `m16n8k16`; f16 x f16 with an
  f16 accumulator (`out_dtype=tl.float16`): `m16n8k16.f16.f16.f16.f16`, accumulating in
  f16 on the tensor cores as Triton does (the result is rounded to f16 after every
  instruction, i.e. every 16 products; wgmma's `.f16` accumulator likewise), its
  accumulators packed two to a register (`packed_registers`);
- f32 x f32 with `input_precision="tf32"`: `m16n8k8.tf32` (inputs rounded to tf32
  first, as the interpreter's rule says); `"ieee"` stays exact on FMAs, and a
  `"tf32x3"` dot reaching here (too small for the split) does too (`split_tf32x3` has
  made the others three tf32 dots);
- int8 x int8 with an int32 accumulator: `m16n8k32.satfinite.s8` (Triton's choice: a
  sum beyond the int32 range saturates instead of wrapping, which takes K > 2**17 of
  extreme values; wgmma has no `.satfinite` in Triton's use and wraps, as the
  interpreter's sums);
- fp8 (e4m3, e5m2) with an f32 accumulator: `m16n8k32.f32.e4m3.e4m3.f32` from sm_89
  (PTX ISA 8.4: `NVPTXDevice.ptx_isa` raises the kernel's `.version`), int8's fragments;
  its products accumulate in f32 (`max_num_imprecise_acc` is wgmma's);
and only when the tile holds at least one instruction (M >= 16, N >= 8, K a multiple
of the instruction's k): smaller dots are FMA work anyway. On sm_90a, with B read in
place from a shared-memory slot, 16-bit, fp8 and int8 dots run on `wgmma` instead; so
do 16-bit dots whose B is computed in registers (fla's `dot(k, v * exp(g))`, a carried
state as B): the lowering stores B into the dot's scratch in the NVMMA layout first
(`lower_wgmma`, `knobs.wgmma_register_b`), as Triton's local_alloc does.
wgmma transposes 16-bit operands only; an 8-bit operand's slot is therefore always
stored K-major (`lower_shared.buffer_layout`), whichever way its copies run: copies
along N (a row-major B) or M (a column-major A) go through registers, which is
Triton's transposing local store. So the choice does not depend on the operands'
memory order (TMA rings, which cannot transpose, take 16-bit operands only:
`tma.tma_loads`).

`warps_per_cta` follows Triton's rule for mma v2: give warps to the dimension with the
most instruction tiles left per warp, M first on ties, until all warps are placed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...config import knobs
from ...ir.core import Instr
from ...ir.types import element_of, shape_of

# (a type, accumulator type) -> (ptx a/b type, k, k_width, element bytes)
_INSTRUCTIONS = {
    ("f16", "f32"): ("f16", 16, 2, 2),
    ("f16", "f16"): ("f16", 16, 2, 2),
    ("bf16", "f32"): ("bf16", 16, 2, 2),
    ("f32", "f32"): ("tf32", 8, 1, 4),
    ("i8", "i32"): ("s8", 32, 4, 1),
}
# fp8 operands on mma.sync: sm_89+ (PTX ISA 8.4), the fragments of int8's m16n8k32
_FP8_MMA_SYNC_CAPABILITY = 89


@dataclass(frozen=True)
class MmaChoice:
    """An `mma.sync.aligned.m16n8k{k}` (version 2) over `warps_per_cta` (wm, wn) warps,
    or a `wgmma.mma_async.m64n{n_instr}k{k}` (version 3, sm_90a: both operands read
    from shared memory; `wm` a multiple of 4, each warpgroup 64 rows)."""

    ab_type: str          # PTX operand type: f16 bf16 tf32 s8 e4m3 e5m2
    acc_type: str         # PTX accumulator type: f32 s32 f16
    k: int                # the instruction's K
    k_width: int          # consecutive K elements per 32-bit register
    elem_bytes: int
    warps_per_cta: tuple[int, int]
    version: int = 2
    n_instr: int = 8      # the instruction's N
    # fp8 wgmma with `max_num_imprecise_acc` at most the dot's K: the K steps each
    # partial accumulator takes before it is added to the f32 one (0: none)
    promote: int = 0

    @property
    def ptx(self) -> str:
        if self.version == 3:
            return (f"wgmma.mma_async.sync.aligned.m64n{self.n_instr}k{self.k}."
                    f"{self.acc_type}.{self.ab_type}.{self.ab_type}")
        sat = ".satfinite" if self.acc_type == "s32" else ""
        return (f"mma.sync.aligned.m16n8k{self.k}.row.col{sat}."
                f"{self.acc_type}.{self.ab_type}.{self.ab_type}.{self.acc_type}")

    @property
    def waits_at_once(self) -> bool:
        """A wgmma dot the lowering waits for itself, never left in flight by the
        pipeliner (`async_dots`): an fp8 dot with promotion waits for each partial sum,
        and an f16 accumulator's registers hold packed pairs that the lowering unpacks
        after the wait (unpacked while in flight, they would be read early)."""
        return bool(self.promote) or self.acc_type == "f16"


def mma_warps(m: int, n: int, num_warps: int, chained: bool = False) -> tuple[int, int]:
    """mma.sync's warps over an [m, n] accumulator: along the dimension with more
    instructions left to split, extra warps (a tile too small) holding copies. A dot
    chained to another (`dot_chains`) puts them all along M, or along N when N > M, where
    the tile gives each warp whole instructions: its accumulator is then the next dot's
    A fragment without an exchange between warps (Triton's placement)."""
    if chained:
        if m >= n and m % (16 * num_warps) == 0:
            return num_warps, 1
        if n > m and n % (8 * num_warps) == 0:
            return 1, num_warps
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if m // (16 * wm) >= n // (8 * wn) and m > 16 * wm:
            wm *= 2
        elif n > 8 * wn:
            wn *= 2
        else:
            wm *= 2  # the tile is covered: extra warps hold copies
    return wm, wn


def wgmma_warps(m: int, n: int, num_warps: int) -> Optional[tuple[int, int]]:
    """Warpgroups over M (64 rows each) first, then over N; None when the tile does not
    give each warpgroup whole instructions."""
    if num_warps % 4 or m % 64:
        return None
    groups = num_warps // 4
    gm = 1
    while gm * 2 <= groups and m % (64 * gm * 2) == 0:
        gm *= 2
    gn = groups // gm
    if n % (8 * gn):
        return None
    return 4 * gm, gn


# fp8 operands: wgmma on sm_90a (B in a shared-memory slot, A in one or in registers),
# else mma.sync m16n8k32 from sm_89 (PTX ISA 8.4; int8's fragments)
_FP8 = {
    ("f8e4m3", "f32"): ("e4m3", 32, 4, 1),
    ("f8e5m2", "f32"): ("e5m2", 32, 4, 1),
}
# the operand types wgmma takes here (tf32 stays on mma.sync: wgmma reads f32 operands
# from shared memory as they are, where tegula's tf32 rounds them to nearest first)
_WGMMA_TYPES = ("f16", "bf16", "e4m3", "e5m2", "s8")
# the operand types whose B the lowering stores from registers for wgmma: 16-bit ones,
# which wgmma reads either way round (an 8-bit B must be K-major: mma.sync keeps those)
_REGISTER_B_TYPES = ("f16", "bf16")


def staged_register_b(choice: Optional["MmaChoice"], b_in_slot: bool) -> bool:
    """Whether a dot's wgmma reads a B its lowering stored from registers into the dot's
    scratch (not in flight past the dot: the scratch is reused by the next op)."""
    return choice is not None and choice.version == 3 and not b_in_slot


def _holds_an_instruction(a_shape: tuple, b_shape: tuple, k: int) -> bool:
    """Whether an [M, K] x [K, N] dot holds one tensor-core instruction of depth `k`
    (smaller dots are FMA work anyway)."""
    (m, kk), n = a_shape, b_shape[1]
    return m >= 16 and n >= 8 and kk % k == 0


def tf32_on_tensor_cores(ins: Instr, capability: int) -> bool:
    """Whether `ins`, a 2-D f32 x f32 dot, would run on the tensor cores with
    `input_precision="tf32"` (`split_tf32x3` asks before making a tf32x3 dot three)."""
    a, b = shape_of(ins.operands[0].type), shape_of(ins.operands[1].type)
    return (capability >= 80 and knobs.dot_tensor_cores and len(a) == 2
            and _holds_an_instruction(a, b, _INSTRUCTIONS[("f32", "f32")][1]))


def choose_mma(ins: Instr, num_warps: int, capability: int, b_in_shared: bool = False,
               a_in_shared: bool = False, chained: bool = False) -> Optional[MmaChoice]:
    """The instruction computing `ins`; wgmma when `b_in_shared` (B is read from a
    shared-memory slot, see pipeline_loops; A comes from a slot or from registers), or
    for a 16-bit B in registers, which the lowering stores into scratch for it
    (`staged_register_b`). fp8 dots take wgmma with B in a slot (stored K-major, as
    every 8-bit wgmma slot), else mma.sync from sm_89; below sm_89 they stay on FMAs.
    `a_in_shared` is informational: wgmma takes A from a slot or from registers.
    `chained`: the dot shares data with another (`dot_chains`), see `mma_warps`."""
    if capability < 80 or not knobs.dot_tensor_cores:
        return None
    a, b, c = ins.operands[0], ins.operands[1], ins.results[0]
    sa, sb, sc = shape_of(a.type), shape_of(b.type), shape_of(c.type)
    if len(sc) != 2:
        return None
    ea, eb, ec = element_of(a.type).name, element_of(b.type).name, element_of(c.type).name
    if ea != eb:
        return None
    if ea == "f32" and ins.attrs.input_precision != "tf32":
        return None
    # fp8: wgmma where it applies (A from a slot or from registers, four 8-bit elements
    # a register: attention's P @ V), else mma.sync from sm_89. On wgmma a dot asking for
    # f32 accumulation every L <= K products gets partial accumulators added in f32
    # (`MmaChoice.promote`, Triton's rule: `_promotion_steps`); Hopper's fp8 tensor
    # cores otherwise accumulate with fewer mantissa bits, as Triton's sm_90 default accepts
    spec = _FP8.get((ea, ec)) or _INSTRUCTIONS.get((ea, ec))
    if (ea, ec) in _FP8 and capability < _FP8_MMA_SYNC_CAPABILITY:
        return None
    if spec is None:
        return None
    if not _holds_an_instruction(sa, sb, spec[1]):
        return None
    m, n = sa[0], sb[1]
    on_slot = b_in_shared and spec[0] in _WGMMA_TYPES
    staged = not b_in_shared and knobs.wgmma_register_b and spec[0] in _REGISTER_B_TYPES
    if capability >= 90 and knobs.wgmma and (on_slot or staged) and n >= 16:
        warps = wgmma_warps(m, n, num_warps)
        if warps is not None:
            return mma_instruction(ins, 3, warps)
    return mma_instruction(ins, 2, mma_warps(m, n, num_warps, chained))


def _promotion_steps(ins: Instr, k: int) -> int:
    """K steps per partial accumulator of an fp8 wgmma dot whose `max_num_imprecise_acc`
    L is at most its K (0: it accumulates in place). Triton 3.6's rule (WGMMA.cpp): a
    partial accumulator takes instructions until it holds at least L products, so
    ceil(L / k) steps, at least one (an explicit L = 0 adds after every instruction);
    the last K step always adds. Unset (None) or above K: no limit — `tl.dot` refuses
    an explicit L above K, and the target's default (2**30 on sm_90) is above any K."""
    limit = getattr(ins.attrs, "max_num_imprecise_acc", None)
    if limit is None or limit > shape_of(ins.operands[0].type)[1]:
        return 0
    return max(1, -(-limit // k))


def mma_instruction(ins: Instr, version: int, warps_per_cta: tuple[int, int]) -> Optional[MmaChoice]:
    """The instruction of a dot computed by mma.sync (`version` 2) or wgmma (3) over
    `warps_per_cta`: operand and accumulator types from the dot's own types, wgmma's N
    from the tile (what each warpgroup covers, at most 256). None for type pairs no
    tensor-core instruction takes."""
    ea, ec = element_of(ins.operands[0].type).name, element_of(ins.results[0].type).name
    spec = _FP8.get((ea, ec)) or _INSTRUCTIONS.get((ea, ec))
    if spec is None:
        return None
    ab, k, k_width, size = spec
    acc = {"i32": "s32", "f16": "f16"}.get(ec, "f32")
    warps = (int(warps_per_cta[0]), int(warps_per_cta[1]))
    if version == 3:
        n_cover = shape_of(ins.results[0].type)[1] // warps[1]
        return MmaChoice(ab, acc, k, k_width, size, warps, version=3, n_instr=min(n_cover, 256),
                         promote=_promotion_steps(ins, k) if (ea, ec) in _FP8 else 0)
    # mma.sync's fp8 products accumulate in f32 (`max_num_imprecise_acc` is about wgmma)
    return MmaChoice(ab, acc, k, k_width, size, warps)
