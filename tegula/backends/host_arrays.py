"""Host arrays found by address, for pointers the kernel did not get as arguments
(shared by the interpreter and the CPU backend).

A pointer table (grouped GEMM, MoE) is an int64 tensor of `data_ptr()`s: the kernel
loads real addresses and casts them to pointers. The interpreter resolves such an
address to the live host array whose memory holds it, so the access stays
bounds-checked against that array. Candidates are every live torch CPU tensor (their
storages; torch tensors are tracked by the garbage collector) and the numpy arrays
reachable from the Python stack of the launch (locals and globals of every frame, and
two levels inside their lists, tuples, dicts and objects' attributes; numpy arrays are
not tracked by the collector). An address in none of them stays unresolved and the access reports it.
"""
from __future__ import annotations

import gc
import sys
import warnings
from typing import Any, Iterator, NamedTuple, Optional

import numpy as np


class HostArray(NamedTuple):
    low: int        # real address of the first byte
    nbytes: int
    owner: Any      # keeps the memory alive while the launch uses it
    writeable: bool
    name: str


def _numpy_root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray) and a.base.flags.c_contiguous:
        a = a.base
    return a


def _numpy_entry(a: np.ndarray) -> Optional[HostArray]:
    a = _numpy_root(a)
    if a.dtype.hasobject or not (a.flags.c_contiguous or a.flags.f_contiguous) or a.nbytes == 0:
        return None
    low = int(a.__array_interface__["data"][0])
    return HostArray(low, int(a.nbytes), a, bool(a.flags.writeable),
                     f"numpy array {a.dtype}{list(a.shape)} at {hex(low)} (found by address)")


def _torch_entries() -> Iterator[HostArray]:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    tensor_cls = torch.Tensor
    seen: set[int] = set()
    tensors = [obj for obj in gc.get_objects() if isinstance(obj, tensor_cls)]
    for obj in tensors:
        try:
            if obj.device.type != "cpu" or obj.is_sparse:
                continue
            storage = obj.untyped_storage()
            low, nbytes = int(storage.data_ptr()), int(storage.nbytes())
        except (RuntimeError, AttributeError, NotImplementedError):
            continue  # meta, fake or functional tensors have no host memory
        if nbytes == 0 or low in seen:
            continue
        seen.add(low)
        yield HostArray(low, nbytes, obj, True, f"torch tensor {str(obj.dtype).removeprefix('torch.')}"
                                                f"{list(obj.shape)} at {hex(low)} (found by address)")


def _stack_numpy_entries() -> Iterator[HostArray]:
    seen: set[int] = set()

    def visit(value: Any, depth: int) -> Iterator[HostArray]:
        if isinstance(value, np.ndarray):
            if id(value) not in seen:
                seen.add(id(value))
                entry = _numpy_entry(value)
                if entry is not None:
                    yield entry
        elif depth > 0 and isinstance(value, (list, tuple)):
            for v in value[:4096]:
                yield from visit(v, depth - 1)
        elif depth > 0 and isinstance(value, dict) and id(value) not in seen:
            seen.add(id(value))
            for v in list(value.values())[:4096]:
                yield from visit(v, depth - 1)
        elif depth > 0 and isinstance(getattr(value, "__dict__", None), dict) and not isinstance(value, type):
            yield from visit(value.__dict__, depth)  # an object's attributes (self.weights)

    frame = sys._getframe(1)
    while frame is not None:
        yield from visit(dict(frame.f_locals), 3)
        yield from visit(frame.f_globals, 3)
        frame = frame.f_back


class HostArrayIndex:
    """Every candidate host array of one launch, searchable by address (built once,
    on the first address no argument buffer holds)."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            # isinstance() / __dict__ read attributes that some deprecated objects warn about
            warnings.simplefilter("ignore")
            entries = list(_torch_entries()) + list(_stack_numpy_entries())
        entries.sort(key=lambda e: (e.low, -e.nbytes))
        self.entries = entries
        self.lows = np.array([e.low for e in entries], dtype=np.int64)

    def find(self, address: int) -> Optional[HostArray]:
        """The array holding `address` (the widest of those starting nearest below it)."""
        i = int(np.searchsorted(self.lows, address, side="right")) - 1
        while i >= 0:
            e = self.entries[i]
            if e.low <= address < e.low + e.nbytes:
                return e
            i -= 1
            if address - self.entries[i + 1].low > (1 << 32):
                break
        return None
