"""Buffers, pointer values and the fake address space of one interpreted launch.

Each pointer argument's array becomes a `Buffer`: a flat uint8 view of the bytes the
array spans (lowest to highest address, whatever its strides), aliasing the caller's
memory so stores land in the caller's array. (A CPU tensor view narrower than its
storage arrives as a byte view of the whole storage anchored at the view's first
element, `runtime.args`: a kernel may reach all of the allocation, as on a GPU.)
A pointer value is a `Ptr`: the buffer it points into and a byte offset from that
buffer's first byte. Tiles of pointers keep one int64 offset array and, in the common
case, one `Buffer` for the whole tile; a tile
whose elements point into different buffers (after a `select` or `int_to_ptr`) keeps
an int32 array of buffer indices instead (-1: no buffer).

`ptr_to_int` needs addresses. Buffer k gets the fake base address 2**52 + (k + 1) * 2**40
plus its real address modulo 16, so integer round trips work, addresses of different
buffers never collide, and alignment arithmetic (`addr % 16`) gives the real answer.
An address resolves to the buffer whose base is nearest (within ±2**39), so pointers a
little before a buffer's start still name that buffer in error messages. Fake addresses
lie above every real user-space address; a real one (a `data_ptr()` loaded from a
pointer table) resolves to the argument buffer holding it, else to a live host array
found by address (`backends/host_arrays.py`, shared with the CPU backend), which becomes a buffer
of the launch.
"""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from ...errors import KernelArgumentError
from ..host_arrays import byte_span

_WINDOW_BITS = 40
_HALF_WINDOW = 1 << (_WINDOW_BITS - 1)
_FAKE_ORIGIN = 1 << 52  # above the 48-bit user address space


class _RawBytes:
    """Exposes a byte range of an existing array through `__array_interface__` so that
    numpy can view it as uint8 (holding `owner` keeps the memory alive)."""

    def __init__(self, address: int, nbytes: int, readonly: bool, owner: Any):
        self.owner = owner
        self.__array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (address, readonly), "version": 3,
        }


class Buffer:
    """The bytes of one pointer argument. `origin` is the byte offset, within the
    buffer, of the array's element [0, ..., 0] — where the argument pointer points."""

    __slots__ = ("index", "name", "mem", "nbytes", "base", "real", "origin", "writeable", "_typed")

    def __init__(self, index: int, name: str, mem: np.ndarray, address: int, origin: int,
                 writeable: bool):
        self.index = index
        self.name = name
        self.mem = mem
        self.nbytes = int(mem.shape[0])
        self.base = _FAKE_ORIGIN + ((index + 1) << _WINDOW_BITS) + (address & 15)
        self.real = address  # the real address of the first byte
        self.origin = origin
        self.writeable = writeable
        self._typed: dict[np.dtype, tuple[np.ndarray, int, int]] = {}

    def typed(self, dtype: np.dtype) -> tuple[np.ndarray, int, int]:
        """(view, start, count): the buffer as `count` elements of `dtype` starting at
        byte `start`, the first byte whose real address is a multiple of the size."""
        got = self._typed.get(dtype)
        if got is None:
            size = dtype.itemsize
            start = (-self.base) % size
            count = max(0, (self.nbytes - start) // size)
            view = self.mem[start:start + count * size].view(dtype)
            got = self._typed[dtype] = (view, start, count)
        return got

    def __repr__(self) -> str:
        return f"<Buffer '{self.name}' {self.nbytes} bytes>"


class Ptr:
    """A pointer value: `buf` (a `Buffer`, or an int32 array of buffer indices with -1
    for "no buffer") and `off`, byte offsets from the buffer's first byte (an int64
    array for a tile, an int64 scalar for a scalar pointer)."""

    __slots__ = ("buf", "off")

    def __init__(self, buf: Union[Buffer, np.ndarray], off: Any):
        self.buf = buf
        self.off = off

    @property
    def uniform(self) -> bool:
        return isinstance(self.buf, Buffer)

    def __repr__(self) -> str:
        name = self.buf.name if isinstance(self.buf, Buffer) else "mixed"
        return f"<Ptr {name} + {self.off}>"


def _as_array(obj: Any, name: str) -> np.ndarray:
    """A pointer argument as an ndarray sharing its memory (numpy, torch CPU tensors,
    anything exposing `__array_interface__` or the buffer protocol)."""
    if isinstance(obj, np.ndarray):
        return obj
    module = type(obj).__module__
    if module.startswith("torch"):
        if getattr(obj, "is_cuda", False) or str(getattr(obj, "device", "cpu")) != "cpu":
            raise KernelArgumentError(f"argument '{name}': the interpreter needs CPU memory, "
                                      f"got a tensor on {obj.device}")
        import torch  # only reached when the caller already uses torch

        t = obj.detach()
        if t.dtype in (torch.bfloat16,):
            t = t.view(torch.int16)
        elif str(t.dtype).startswith("torch.float8"):
            t = t.view(torch.uint8)
        return t.numpy()
    if hasattr(obj, "__array_interface__"):
        return np.asarray(obj)
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        raise KernelArgumentError(
            f"argument '{name}' is a pointer: pass an array (numpy, torch CPU tensor), "
            f"got {type(obj).__name__}") from None


class Memory:
    """The buffers of one launch and the fake address space over them."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []
        self._bases: np.ndarray = np.zeros(1, dtype=np.int64)
        self._host_buffers: dict[int, Buffer] = {}

    @property
    def bases(self) -> np.ndarray:
        """bases[k + 1] is buffer k's base; bases[0] = 0 serves index -1 ("no buffer"),
        whose offsets are then absolute addresses."""
        if self._bases.shape[0] != len(self.buffers) + 1:
            self._bases = np.array([0] + [b.base for b in self.buffers], dtype=np.int64)
        return self._bases

    def add(self, obj: Any, name: str) -> Ptr:
        """Register a pointer argument; return the pointer the kernel receives."""
        arr = _as_array(obj, name)
        address = int(arr.__array_interface__["data"][0])
        writeable = bool(arr.flags.writeable)
        if arr.flags.c_contiguous or arr.flags.f_contiguous:
            # The common case: element [0, ..., 0] is the lowest address; a flat byte
            # view of the array itself aliases it.
            low = 0
            mem = arr.reshape(-1, order="A").view(np.uint8)
        else:
            low, high = byte_span(arr)
            mem = np.asarray(_RawBytes(address + low, high - low, not writeable, arr))
        buf = Buffer(len(self.buffers), name, mem, address + low, -low, writeable)
        self.buffers.append(buf)
        return Ptr(buf, np.int64(buf.origin))

    # ---------------------------------------------------------------- addresses
    def address(self, p: Ptr) -> Any:
        """Fake int64 addresses of a pointer value."""
        if isinstance(p.buf, Buffer):
            return np.int64(p.buf.base) + p.off
        return self.bases[np.asarray(p.buf) + 1] + p.off

    def resolve(self, addr: Any) -> Ptr:
        """Integer addresses → pointer value (the inverse of `address`)."""
        addr = np.asarray(addr).astype(np.int64)
        k = ((addr - _FAKE_ORIGIN + _HALF_WINDOW) >> _WINDOW_BITS) - 1
        ids = np.where((addr >= _FAKE_ORIGIN - _HALF_WINDOW) & (k >= 0) & (k < len(self.buffers)),
                       k, -1).astype(np.int32)
        off = addr - self.bases[ids + 1]
        real = (ids < 0) & (addr > 0) & (addr < _FAKE_ORIGIN - _HALF_WINDOW)
        if real.any():
            ids, off = self._resolve_real(addr, ids, off, real)
        return normalize(self, Ptr(ids, off if off.ndim else np.int64(off)))

    def _resolve_real(self, addr: np.ndarray, ids: np.ndarray, off: np.ndarray,
                      real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Real addresses → (buffer, offset): an argument's buffer, else a live host array."""
        ids, off = np.array(ids), np.array(off)
        for buf in self.buffers:
            hit = real & (ids < 0) & (addr >= buf.real) & (addr < buf.real + buf.nbytes)
            if hit.any():
                ids[hit], off[hit] = buf.index, (addr - buf.real)[hit]
        left = real & (ids < 0)
        if left.any():
            from ..host_arrays import host_arrays_holding

            holding = host_arrays_holding(int(a) for a in np.unique(addr[left]))
            for a in np.unique(addr[left]):
                entry = holding.get(int(a))
                if entry is None:
                    continue
                buf = self._host_buffers.get(entry.low)
                if buf is None:
                    mem = np.asarray(_RawBytes(entry.low, entry.nbytes, not entry.writeable, entry.owner))
                    buf = Buffer(len(self.buffers), entry.name, mem, entry.low, 0, entry.writeable)
                    self.buffers.append(buf)
                    self._host_buffers[entry.low] = buf
                hit = left & (addr == a)
                ids[hit], off[hit] = buf.index, (addr - buf.real)[hit]
        return ids, off

    def buffer_ids(self, p: Ptr, shape: tuple[int, ...]) -> np.ndarray:
        """The buffer index of every element of `p` (shape `shape`)."""
        if isinstance(p.buf, Buffer):
            return np.full(shape, p.buf.index, dtype=np.int32)
        return np.broadcast_to(p.buf, shape)


def normalize(memory: Memory, p: Ptr) -> Ptr:
    """Collapse an index-array pointer whose elements share one buffer to the fast
    single-buffer form."""
    ids = p.buf
    if isinstance(ids, Buffer):
        return p
    ids = np.asarray(ids)
    if ids.size == 0:
        return p
    first = int(ids.flat[0])
    if first >= 0 and (ids.ndim == 0 or bool((ids == first).all())):
        return Ptr(memory.buffers[first], p.off)
    return p


def select_ptr(memory: Memory, cond: Any, a: Ptr, b: Ptr) -> Ptr:
    """Elementwise `cond ? a : b` over pointer values."""
    off = np.where(cond, a.off, b.off)
    if a.buf is b.buf:
        return Ptr(a.buf, off)
    shape = off.shape
    ids = np.where(cond, memory.buffer_ids(a, shape), memory.buffer_ids(b, shape))
    return normalize(memory, Ptr(ids.astype(np.int32), off))


def map_ptr(fn, p: Ptr) -> Ptr:
    """Apply a shape function (reshape, broadcast, ...) to a pointer value."""
    buf = p.buf if isinstance(p.buf, Buffer) else fn(p.buf)
    return Ptr(buf, fn(p.off))


def join_ptr(memory: Memory, fn, parts: list[Ptr]) -> Ptr:
    """Combine several pointer values with `fn` (e.g. stack) applied to each field."""
    if all(p.buf is parts[0].buf for p in parts) and isinstance(parts[0].buf, Buffer):
        return Ptr(parts[0].buf, fn([p.off for p in parts]))
    ids = fn([memory.buffer_ids(p, np.shape(p.off)) for p in parts])
    return normalize(memory, Ptr(ids, fn([p.off for p in parts])))
