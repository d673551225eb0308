"""Reads of a 16-bit tile from shared memory with `ldmatrix` where the layout read into
holds its fragments: a ring slot read back into an accumulator's layout (fla's
`v - dot(w, h)`), a conversion through scratch into one (`convert.through_smem`); and
writes with `stmatrix` (sm_90) out of such a layout, a conversion's first half.

`ldmatrix.x4` hands each thread one 32-bit register of each of four 8x8 matrices: of
matrix j, row `lane / 4`, elements `2 (lane % 4)` and the next. A layout whose register
bit 0 steps to the next element in memory, lane bits 0-1 to the next pairs (so a lane
quad holds 16 contiguous bytes), lane bits 2-4 to 8 rows and register bits 1-2 to the
four matrices is exactly what the instruction returns, whatever those rows and matrices
are: the accumulator layouts of mma.sync and wgmma, and their operand layouts, for 16-bit
elements. Each lane then supplies the address of one row: lanes 0-7 matrix 0's rows,
8-15 matrix 1's, ... One instruction replaces four 4-byte `ld.shared` a thread, and the
reads of one matrix's 8 rows hit distinct banks wherever rows are padded or swizzled by
16 bytes.

`ldmatrix.trans` hands out the transposed 8x8 blocks: a layout whose pairs run across
the rows stored (a column-major tile's A fragment) is read so (`trans=True`).

`ldmatrix_rows(lay)` says whether (and with how many matrices) a layout is read so, as
the layout of the row addresses (`matrix_rows`: either way); `read_ldmatrix` emits the
reads, `write_stmatrix` the writes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import llvmlite.ir as ir

from .linear_layout import LinearLayout
from .packed_registers import pack_registers, unpack_registers

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

# elements of one matrix row (16 bytes of 16-bit elements)
ROW_ELEMENTS = 8


def ldmatrix_rows(lay: LinearLayout, low: Callable[[int], int] = lambda b: b,
                  trans: bool = False) -> Optional[tuple[LinearLayout, int]]:
    """For a layout `lay` of 16-bit elements whose flat index `low` maps to a memory
    position: the layout of `ldmatrix` row addresses that reads it (lane bits 0-2 a
    matrix's rows, 3-4 the matrix; register bits the groups of four matrices) and the
    number of matrices per instruction (1, 2 or 4); None when the layout does not hold
    the instruction's fragments. `low(b)` is the memory offset of flat-index basis `b`
    (the identity where rows are contiguous in flat order).

    With `trans`, for `ldmatrix.trans`, which hands thread t of matrix j the elements
    at position t / 4 of the matrix's rows 2 (t % 4) and the next: the layout's register
    bit 0 and lane bits 0-1 then step by whole rows (any 16-byte aligned offsets, each
    row's address comes from its own lane), lane bits 2-4 by 1, 2, 4 elements along
    them — a fragment whose pairs run across the rows stored (an A fragment from a tile
    stored K-major's transpose, a B fragment from a row-major [K, N] tile)."""
    if len(lay.reg) < 1 or len(lay.lane) < 5:
        return None
    # a lane's pair and its quad's 8 elements; the 8 lane groups: rows of a matrix
    pairs, groups = (lay.reg[0], lay.lane[0], lay.lane[1]), tuple(lay.lane[2:5])
    along, row_bases = (groups, pairs) if trans else (pairs, groups)
    if tuple(low(b) for b in along) != (1, 2, 4):
        return None
    if any(b == 0 or low(b) % ROW_ELEMENTS for b in row_bases):
        return None
    if any(low(b) % ROW_ELEMENTS for b in lay.reg[1:] + lay.warp):
        return None
    mbits = min(2, len(lay.reg) - 1)
    picks = tuple(lay.reg[1:1 + mbits]) + (0,) * (2 - mbits)
    rows = LinearLayout(lay.shape, tuple(lay.reg[1 + mbits:]), row_bases + picks, lay.warp)
    return rows, 1 << mbits


def matrix_rows(lay: LinearLayout, low: Callable[[int], int] = lambda b: b
                ) -> Optional[tuple[LinearLayout, int, bool]]:
    """`ldmatrix_rows` of `lay` as stored, else transposed: (row addresses, matrices an
    instruction, `.trans`?), or None."""
    for trans in (False, True):
        found = ldmatrix_rows(lay, low, trans)
        if found is not None:
            return found[0], found[1], trans
    return None


def read_ldmatrix(lw: "KernelLowering", rows: LinearLayout, count: int, address: Callable[[int], ir.Value],
                  elem_type: ir.Type, trans: bool = False) -> list[ir.Value]:
    """The registers of the layout `ldmatrix_rows` was asked about (with `trans` or
    not), in its register order: for each group g of `count` matrices, `address(g)` is
    this thread's row address (a shared byte offset, from `rows`)."""
    out: list[ir.Value] = []
    for g in range(rows.n_regs):
        words = lw.dev.ldmatrix(lw.b, address(g), count, trans)
        out += unpack_registers(lw.b, words, elem_type, 2)
    return out


def write_stmatrix(lw: "KernelLowering", rows: LinearLayout, count: int, address: Callable[[int], ir.Value],
                   regs: list[ir.Value], trans: bool = False) -> None:
    """The mirror of `read_ldmatrix` (sm_90): the registers `regs` of a layout
    `ldmatrix_rows` accepted (with `trans` or not), written `count` matrices an
    instruction, `address(g)` this thread's row address of group g."""
    per = 2 * count
    for g in range(rows.n_regs):
        lw.dev.stmatrix(lw.b, address(g), pack_registers(lw.b, regs[g * per:(g + 1) * per], 2), trans)
