"""Checked atomic read-modify-write through pointer values (the memory side of
`atomic_rmw` and `atomic_cas`).

Active lanes are checked exactly like a store's (alignment, bounds, a writable buffer;
`access` owns those checks and their messages). The update then runs as if each active
lane did its read-modify-write alone, one after the other in flat (row-major) order of
the tile: where several lanes hit one address, each sees what the lane before it left,
so their old values differ, as on the GPU where the hardware orders them one way or
another. Programs run one at a time in the interpreter, so atomics of different
programs never interleave.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .access import AccessFault, _active, _indices, _no_buffer_fault
from .memory import Buffer, Memory, Ptr

# update(old images, operand images...) -> new images; all arrays of one memory dtype
Update = Callable[..., np.ndarray]


def _apply(buf: Buffer, off: Any, mask: Optional[np.ndarray], dtype: np.dtype, type_name: str,
           update: Update, operands: tuple[np.ndarray, ...], old_out: np.ndarray) -> None:
    view, idx = _indices("atomic", buf, off, mask, dtype, type_name)
    shape = old_out.shape
    active = _active(mask, shape)
    if not active.any():
        return
    if not buf.writeable:
        raise AccessFault("readonly", f"atomic on pointer argument '{buf.name}', whose array is read-only")
    flat_idx = np.broadcast_to(idx, shape).reshape(-1)
    lanes = np.flatnonzero(active.reshape(-1))
    targets = flat_idx[lanes]
    ops = [np.broadcast_to(o, shape).reshape(-1)[lanes] for o in operands]
    old_flat = old_out.reshape(-1)
    if np.unique(targets).size == targets.size:
        old = view[targets]
        view[targets] = update(old, *ops)
        old_flat[lanes] = old
        return
    for k, (lane, t) in enumerate(zip(lanes, targets)):  # duplicates: one lane at a time, in order
        old = view[t:t + 1]
        old_flat[lane] = old[0]
        view[t:t + 1] = update(old.copy(), *(o[k:k + 1] for o in ops))


def read_modify_write(memory: Memory, p: Ptr, mask: Optional[np.ndarray], dtype: np.dtype, type_name: str,
                      update: Update, *operands: np.ndarray) -> Any:
    """Apply `update` at every active lane of `p`; return the old memory images (0 in
    masked-off lanes)."""
    shape = np.shape(p.off)
    old = np.zeros(shape, dtype=dtype)
    if mask is not None:
        mask = np.broadcast_to(mask, shape)
    buf = p.buf
    if isinstance(buf, Buffer):
        _apply(buf, p.off, mask, dtype, type_name, update, operands, old)
        return old if old.ndim else old[()]
    active = _active(mask, shape)
    ids = np.broadcast_to(np.asarray(buf), shape)
    if np.any(active & (ids < 0)):
        raise _no_buffer_fault("atomic", memory, p, active)
    for k in np.unique(ids[active]):  # buffers are disjoint: per-buffer order is the flat order
        _apply(memory.buffers[int(k)], p.off, active & (ids == k), dtype, type_name, update, operands, old)
    return old if old.ndim else old[()]
