"""Where a tile's elements live in shared memory: the swizzled layouts tensor-core
operands are read from, as linear maps over GF(2).

A shared layout maps an element's row-major flat index (see `linear_layout`) to its
offset in elements from the buffer's start. Both swizzles in use are XORs of address
bits, so each is a `BitMap`, and questions such as "which 16-byte chunk does lane l of
an `ldmatrix` read" are one evaluation.

- `swizzled_offsets` is Triton's `#swizzled<vec, per_phase, max_phase, order>`: within
  each row of the contiguous dimension, vectors of `vec` elements are permuted by XOR
  with `(row / per_phase) % max_phase`, so the 8 rows an `ldmatrix` reads hit 8
  different bank groups. The mma.sync path uses it.
- `nvmma_offsets` is the hardware swizzle that TMA writes and wgmma descriptors read
  (`#nvmma<swizzle_bytes>`): the tile is stored as boxes whose contiguous extent is
  `swizzle_bytes` (32, 64 or 128 bytes; 0 = no swizzle), one after the other; inside a
  box, byte-address bits [4, 4+s) are XORed with bits [7, 7+s) where
  `s = log2(swizzle_bytes / 16)` (PTX ISA: "Tensor-map swizzling modes" and the wgmma
  shared-memory matrix layouts). The 128-byte mode needs the buffer 1024-byte aligned.
"""
from __future__ import annotations

from typing import Sequence

from .linear_layout import BitMap, dim_fields, log2


def _check_2d(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) != 2:
        raise ValueError(f"shared tensor-core layouts are 2-D, got shape {tuple(shape)}")
    return log2(shape[0]), log2(shape[1])


def swizzled_offsets(shape: Sequence[int], vec: int, per_phase: int, max_phase: int,
                     order: Sequence[int] = (1, 0)) -> BitMap:
    """Triton's swizzled shared layout of a 2-D tile; `order[0]` is the contiguous dim."""
    _check_2d(shape)
    fast, slow = order[0], order[1]
    fields = dim_fields(shape)
    fs, fn = fields[fast]
    ss, sn = fields[slow]
    vbits, pbits, mbits = log2(vec), log2(per_phase), log2(max_phase)
    images = [0] * (fn + sn)
    # offset = slow * C + fast, then the vector index (fast bits >= vbits) ^= phase bits
    for k in range(fn):
        images[fs + k] = 1 << k
    for k in range(sn):
        img = 1 << (fn + k)
        phase_bit = k - pbits  # bit of (slow / per_phase) this slow bit sets
        if 0 <= phase_bit < mbits and vbits + phase_bit < fn:
            img |= 1 << (vbits + phase_bit)
        images[ss + k] = img
    return BitMap(tuple(images))


def nvmma_offsets(shape: Sequence[int], elem_bytes: int, swizzle_bytes: int,
                  transposed: bool = False) -> BitMap:
    """The TMA / wgmma swizzled layout of a 2-D tile (contiguous along the last dim, or
    along the first when `transposed`)."""
    rb, cb = _check_2d(shape)
    if swizzle_bytes not in (0, 32, 64, 128):
        raise ValueError(f"swizzle must be 0, 32, 64 or 128 bytes, got {swizzle_bytes}")
    ebits = log2(elem_bytes)
    fields = dim_fields(shape)
    fast_d, slow_d = (0, 1) if transposed else (1, 0)
    fs, fn = fields[fast_d]
    ss, sn = fields[slow_d]
    span = swizzle_bytes if swizzle_bytes else 1 << (fn + ebits)
    box_bits = min(fn, log2(span) - ebits)  # fast bits inside one box
    s = log2(swizzle_bytes // 16) if swizzle_bytes else 0
    images = [0] * (fn + sn)
    # byte address inside the buffer: [fast in box | slow | box index], then XOR swizzle
    def swz(byte_addr_bit: int) -> int:
        addr = 1 << byte_addr_bit
        if s and 7 <= byte_addr_bit < 7 + s:
            addr |= 1 << (byte_addr_bit - 3)
        return addr

    for k in range(fn):
        bit = ebits + k if k < box_bits else ebits + box_bits + sn + (k - box_bits)
        images[fs + k] = swz(bit) >> ebits
    for k in range(sn):
        images[ss + k] = swz(ebits + box_bits + k) >> ebits
    return BitMap(tuple(images))

