"""Vectorized, checked loads and stores through pointer values.

Every active (unmasked) element of an access is checked: its address must be aligned
to the element size (else `misaligned`), and it must lie inside the buffer its pointer
came from (else `out of bounds`). Masked-off elements are never checked and never
touched: a load reads element 0 for them and the caller substitutes `other` (0 when
absent: the GPU leaves them undefined, the interpreter makes them deterministic).

Stores write active elements in flat (row-major) order of the tile; when several
elements of one store hit the same address, the last one in that order wins. numpy's
fancy assignment does not promise an order, so duplicates are resolved explicitly.

Atomics (`read_modify_write`) check active lanes exactly like a store, then run as if
each lane did its read-modify-write alone, one after the other in flat order: where
several lanes hit one address, each sees what the lane before it left, so their old
values differ, as on the GPU where the hardware orders them one way or another.
Programs run one at a time in the interpreter, so atomics of different programs never
interleave.

Faults are raised as `AccessFault` and turned into located errors (with the kernel
line and program id) by the load/store rules.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .memory import Buffer, Memory, Ptr

_SHOW = 8  # offsets listed in a fault message


class AccessFault(Exception):
    """A bad memory access; `kind` is `bounds`, `misaligned`, `nobuffer` or `readonly`."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def _shift(size: int) -> int:
    return size.bit_length() - 1


def _list(values: np.ndarray) -> str:
    shown = ", ".join(str(int(v)) for v in values[:_SHOW])
    return "[" + shown + (", ..." if values.size > _SHOW else "") + "]"


def _first_index(bad: np.ndarray) -> str:
    if bad.ndim == 0:
        return ""
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
    return f"; first at tile index {idx}"


def _bounds_fault(kind: str, buf: Buffer, q: np.ndarray, active: Optional[np.ndarray],
                  size: int, count: int, type_name: str) -> AccessFault:
    """Describe the out-of-bounds elements of an access (`q`: byte offsets relative to
    the buffer's first aligned element)."""
    q = np.asarray(q)
    idx = q >> _shift(size) if size > 1 else q
    bad = (idx < 0) | (idx >= count)
    if active is not None:
        bad &= np.broadcast_to(active, bad.shape)
    n_bad = int(np.count_nonzero(bad))
    n_active = int(bad.size if active is None else np.count_nonzero(np.broadcast_to(active, bad.shape)))
    offsets = np.asarray(idx)[bad] if bad.ndim else np.asarray([idx])
    msg = (f"out-of-bounds {kind} through pointer argument '{buf.name}': "
           f"{n_bad} of {n_active} accessed {type_name} elements lie outside the buffer of "
           f"{count} elements; element offsets from the buffer start: {_list(offsets)}"
           f"{_first_index(bad)}")
    return AccessFault("bounds", msg)


def _misaligned_fault(kind: str, buf: Buffer, q: np.ndarray, active: Optional[np.ndarray],
                      size: int, start: int, type_name: str) -> AccessFault:
    q = np.asarray(q)
    bad = (q & (size - 1)) != 0
    if active is not None:
        bad &= np.broadcast_to(active, bad.shape)
    offsets = (q[bad] if bad.ndim else np.asarray([q])) + start
    msg = (f"misaligned {kind} of {type_name} ({size}-byte elements) through pointer argument "
           f"'{buf.name}': {int(np.count_nonzero(bad))} element(s) at byte offsets "
           f"{_list(offsets)} from the buffer start are not multiples of {size}{_first_index(bad)}")
    return AccessFault("misaligned", msg)


def _indices(kind: str, buf: Buffer, off: Any, mask: Optional[np.ndarray], dtype: np.dtype,
             type_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Element indices into `buf.typed(dtype)` for every lane (masked-off lanes → 0),
    after checking alignment and bounds of the active lanes."""
    view, start, count = buf.typed(dtype)
    size = dtype.itemsize
    q = off - start if start else off
    if mask is not None:
        q = np.where(mask, q, 0)
    q = np.asarray(q)
    # One reduction each: the OR of all offsets has a low bit set iff one is misaligned;
    # viewed as unsigned, negative indices become huge, so one max checks both bounds.
    if size > 1:
        low_bits = int(np.bitwise_or.reduce(q, axis=None)) if q.ndim else int(q)
        if low_bits & (size - 1):
            raise _misaligned_fault(kind, buf, q, mask, size, start, type_name)
        idx = q >> _shift(size)
    else:
        idx = q
    if count == 0:
        if mask is None or np.any(mask):
            raise _bounds_fault(kind, buf, q, mask, size, count, type_name)
    elif int(_umax(idx)) >= count:
        raise _bounds_fault(kind, buf, q, mask, size, count, type_name)
    return view, idx


def _umax(idx: np.ndarray):
    u = idx.view(np.uint64)
    return np.maximum.reduce(u, axis=None) if u.ndim else u


def _no_buffer_fault(kind: str, memory: Memory, p: Ptr, active: np.ndarray) -> AccessFault:
    addr = np.asarray(memory.address(p))
    bad = np.asarray(p.buf) < 0
    bad = bad & active
    addrs = addr[bad] if bad.ndim else np.asarray([addr])
    shown = ", ".join(hex(int(a) & 0xFFFFFFFFFFFFFFFF) for a in addrs[:_SHOW])
    return AccessFault("nobuffer", f"{kind} through a pointer that points into no argument buffer "
                                   f"(addresses [{shown}{', ...' if addrs.size > _SHOW else ''}])"
                                   f"{_first_index(bad)}; no live host array (torch CPU tensor, or numpy "
                                   "array reachable from the caller) holds them either")


def _active(mask: Optional[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    return np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(mask, shape)


def load(memory: Memory, p: Ptr, mask: Optional[np.ndarray], dtype: np.dtype, type_name: str) -> Any:
    """Gather the memory images (`dtype`) of the elements `p` points at. Masked-off
    lanes hold an arbitrary in-bounds value; the caller replaces them."""
    buf = p.buf
    if isinstance(buf, Buffer):
        view, idx = _indices("load", buf, p.off, mask, dtype, type_name)
        if not view.size:  # every lane masked off (else _indices faulted)
            return np.zeros(np.shape(idx), dtype)[()]
        return view.take(idx)
    shape = np.shape(p.off)
    active = _active(mask, shape)
    ids = np.broadcast_to(np.asarray(buf), shape)
    if np.any(active & (ids < 0)):
        raise _no_buffer_fault("load", memory, p, active)
    out = np.zeros(shape, dtype=dtype)
    for k in np.unique(ids[active]):
        lanes = active & (ids == k)
        view, idx = _indices("load", memory.buffers[int(k)], p.off, lanes, dtype, type_name)
        if view.size:
            out = np.where(lanes, view.take(idx), out)
    return out if out.ndim else out[()]


def _scatter(buf: Buffer, off: Any, raw: Any, mask: Optional[np.ndarray], dtype: np.dtype,
             type_name: str) -> None:
    view, start, count = buf.typed(dtype)
    size = dtype.itemsize
    q = np.asarray(off - start if start else off)
    raw = np.broadcast_to(raw, q.shape)
    if mask is not None:
        mask = np.broadcast_to(mask, q.shape)
        q_act, vals = q[mask], raw[mask]
    else:
        q_act, vals = q.reshape(-1), raw.reshape(-1)
    if q_act.size == 0:
        return
    if size > 1:
        if int(np.bitwise_or.reduce(q_act, axis=None)) & (size - 1):
            raise _misaligned_fault("store", buf, q, mask, size, start, type_name)
        idx = q_act >> _shift(size)
    else:
        idx = q_act
    if count == 0 or int(_umax(idx)) >= count:
        raise _bounds_fault("store", buf, q, mask, size, count, type_name)
    if not buf.writeable:
        raise AccessFault("readonly", f"store to pointer argument '{buf.name}', whose array is read-only")
    if idx.size > 1 and not bool(np.all(idx[1:] > idx[:-1])):
        # Duplicate or unordered addresses: keep, per address, the last lane in flat order.
        rev = idx[::-1]
        idx, first = np.unique(rev, return_index=True)
        vals = vals[::-1][first]
    view[idx] = vals


def store(memory: Memory, p: Ptr, raw: Any, mask: Optional[np.ndarray], dtype: np.dtype,
          type_name: str) -> None:
    """Scatter the memory images `raw` to the elements `p` points at (active lanes)."""
    buf = p.buf
    if isinstance(buf, Buffer):
        _scatter(buf, p.off, raw, mask, dtype, type_name)
        return
    shape = np.shape(p.off)
    active = _active(mask, shape)
    ids = np.broadcast_to(np.asarray(buf), shape)
    if np.any(active & (ids < 0)):
        raise _no_buffer_fault("store", memory, p, active)
    # Buffers are disjoint, so storing buffer by buffer keeps flat-order semantics.
    for k in np.unique(ids[active]):
        _scatter(memory.buffers[int(k)], p.off, raw, active & (ids == k), dtype, type_name)


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
