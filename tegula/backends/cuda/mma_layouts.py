"""Where the tensor-core instructions put matrix elements, as `LinearLayout`s.

`mma.sync` (sm_80+) and `wgmma` (sm_90a) read and write fixed per-lane fragments; these
constructors express those fragments, repeated over a CTA's warps and over registers,
as linear layouts of whole tiles, so the rest of the backend (conversions, the check
that attention's P can feed the next dot with no data movement, the emulator's host
models) treats them like any other layout.

The fragments follow the PTX ISA ("Matrix fragments for mma.m16n8k16",
"... mma.m16n8k8" for tf32, "... mma.m16n8k32" for 8-bit types, and the wgmma
"Register fragments" of the m64nNk16 family). With `group = lane >> 2` and
`quad = lane & 3`:
- accumulator (m16n8, one f32/i32 per register): row `group + 8*r1`, column
  `2*quad + r0` — register bit 0 steps the column by 1, bit 1 the row by 8;
- operand A (m16 x k): rows as the accumulator; the `k_width` consecutive k that one
  32-bit register packs (2 for 16-bit types, 4 for 8-bit) sit at `k_width*quad`, and
  further register bits step the row by 8 and k by `4*k_width`;
- operand B (k x n8): column `group`, k as in A's columns.
tf32 (k8) has one element per 32-bit register: `k_width` 1.

Register order is part of the contract with the lowering: a thread's registers are the
instruction's fragment first (in the order the instruction lists them), then the
repetitions along the tile's fast dimension (N for the accumulator, K for operands),
then along the slow one. With that order the accumulator of a 16-bit dot and the A
operand of the next one share register bases, which is why attention's P (converted to
f16) feeds the second dot as a register renaming.

Warps: `warps_per_cta = (wm, wn)` tiles the CTA over M and N (warp index = wm_i * wn +
wn_i, N fastest, as Triton's mma layouts). Operand layouts take their parent's warps:
warps along the other dimension hold copies (zero bases). wgmma (v3) groups 4
consecutive warps into a warpgroup whose warps stack along M by 16 rows; further
warpgroups tile M then N.
"""
from __future__ import annotations

from typing import Sequence

from .linear_layout import LinearLayout, dim_fields, log2

LANE_GROUP_BITS = 3   # lane >> 2: 8 groups
LANE_QUAD_BITS = 2    # lane & 3: 4 threads per group


class _Bits:
    """Allocates the bits of one dimension of a 2-D tile, low to high, handing out zero
    bases once the dimension is exhausted (a smaller tile than the pattern covers: the
    extra register/lane/warp bits hold copies)."""

    def __init__(self, shape: Sequence[int], dim: int) -> None:
        self.shift, self.nbits = dim_fields(shape)[dim]

    def at(self, bit: int) -> int:
        return 1 << (self.shift + bit) if bit < self.nbits else 0

    def step(self, stride: int) -> int:
        return self.at(log2(stride))


def _reps(bits: _Bits, covered: int) -> list[int]:
    """Register bases repeating a pattern that covers `covered` elements of a dimension."""
    return [bits.at(b) for b in range(log2(covered), bits.nbits)]


def _check_2d(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) != 2:
        raise ValueError(f"tensor-core layouts are 2-D, got shape {tuple(shape)}")
    for d in shape:
        log2(d)
    return shape[0], shape[1]


def _warp_bases(rows: _Bits, cols: _Bits, warps_per_cta: Sequence[int], row_step: int, col_step: int,
                row_first: bool = False) -> list[int]:
    wm, wn = warps_per_cta
    along_n = [cols.step(col_step << i) for i in range(log2(wn))]
    along_m = [rows.step(row_step << i) for i in range(log2(wm))]
    return along_m + along_n if row_first else along_n + along_m


def mma_v2_accumulator(shape: Sequence[int], warps_per_cta: Sequence[int]) -> LinearLayout:
    """The accumulator (C/D) of `mma.sync.m16n8kK` over an [M, N] tile."""
    m, n = _check_2d(shape)
    wm, wn = warps_per_cta
    rows, cols = _Bits(shape, 0), _Bits(shape, 1)
    lane = [cols.at(1), cols.at(2), rows.at(0), rows.at(1), rows.at(2)]
    warp = _warp_bases(rows, cols, warps_per_cta, 16, 8)
    reg = [cols.at(0), rows.at(3)]
    reg += [cols.at(b) for b in range(3 + log2(wn), cols.nbits)]
    reg += [rows.at(b) for b in range(4 + log2(wm), rows.nbits)]
    return LinearLayout((m, n), tuple(reg), tuple(lane), tuple(warp))


def mma_v2_operand(op_idx: int, shape: Sequence[int], warps_per_cta: Sequence[int],
                   k_width: int) -> LinearLayout:
    """Operand `op_idx` (0 = A [M, K], 1 = B [K, N]) of `mma.sync` whose parent
    accumulator uses `warps_per_cta`. `k_width`: consecutive k per 32-bit register (2 for
    f16/bf16, 4 for 8-bit types, 1 for tf32)."""
    if k_width not in (1, 2, 4):
        raise ValueError(f"k_width must be 1, 2 or 4, got {k_width}")
    _check_2d(shape)
    wm, wn = warps_per_cta
    kdim, odim = (1, 0) if op_idx == 0 else (0, 1)
    ks, other = _Bits(shape, kdim), _Bits(shape, odim)
    kw = log2(k_width)
    # lane: quad → k (above the packed k), group → row (A) / column (B)
    lane = [ks.at(kw), ks.at(kw + 1), other.at(0), other.at(1), other.at(2)]
    instr_k = 8 * k_width if k_width > 1 else 8   # k16 (16-bit), k32 (8-bit), k8 (tf32)
    packed = [ks.at(b) for b in range(kw)]
    if op_idx == 0:
        # A: [packed k] + row+8 + k+4*k_width (absent for tf32, whose k8 is 4 quads × 2)
        frag = packed + [other.at(3), ks.at(kw + 2)]
        warp = [0] * log2(wn) + [other.step(16 << i) for i in range(log2(wm))]
        rep_other = [other.at(b) for b in range(4 + log2(wm), other.nbits)]
    else:
        frag = packed + [ks.at(kw + 2)]
        warp = [other.step(8 << i) for i in range(log2(wn))] + [0] * log2(wm)
        rep_other = [other.at(b) for b in range(3 + log2(wn), other.nbits)]
    rep_k = _reps(ks, instr_k)
    reg = frag + rep_k + rep_other
    return LinearLayout(tuple(shape), tuple(reg), tuple(lane), tuple(warp))


def mma_v3_accumulator(shape: Sequence[int], warps_per_cta: Sequence[int]) -> LinearLayout:
    """The accumulator of `wgmma.mma_async.m64nNk*` over an [M, N] tile: each warpgroup
    (4 consecutive warps, `warps_per_cta[0]` a multiple of 4) covers 64 rows, its warps
    16 rows each; within a warp the m16n8 pattern repeats along N in registers."""
    m, n = _check_2d(shape)
    wm, wn = warps_per_cta
    if wm % 4:
        raise ValueError(f"wgmma needs warps along M in multiples of 4, got {tuple(warps_per_cta)}")
    rows, cols = _Bits(shape, 0), _Bits(shape, 1)
    lane = [cols.at(1), cols.at(2), rows.at(0), rows.at(1), rows.at(2)]
    # warps 0-3 of a group: rows 16, 32; then further groups along M, then along N
    warp = [rows.at(4), rows.at(5)] + [rows.step(64 << i) for i in range(log2(wm // 4))]
    n_cover = n // wn
    warp += [cols.step(n_cover << i) for i in range(log2(wn))]
    reg = [cols.at(0), rows.at(3)] + [cols.at(b) for b in range(3, log2(n_cover))]
    reg += [rows.at(b) for b in range(6 + log2(wm // 4), rows.nbits)]
    return LinearLayout((m, n), tuple(reg), tuple(lane), tuple(warp))


def wgmma_register_a(shape: Sequence[int], warps_per_cta: Sequence[int], k_width: int) -> LinearLayout:
    """Operand A of wgmma taken from registers ([M, K]): mma.sync's A fragment per warp,
    the warps of a warpgroup stacked along M by 16 rows, groups along M, warps along N
    holding copies."""
    _check_2d(shape)
    wm, wn = warps_per_cta
    if wm % 4:
        raise ValueError(f"wgmma needs warps along M in multiples of 4, got {tuple(warps_per_cta)}")
    base = mma_v2_operand(0, shape, (wm, 1), k_width)
    # mma_v2_operand with (wm, 1) puts warp bits along M in 16-row steps: exactly the
    # warpgroup stacking; add copies for warps along N.
    return LinearLayout(base.shape, base.reg, base.lane, base.warp + (0,) * log2(wn))
