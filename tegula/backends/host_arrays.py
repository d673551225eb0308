"""Host arrays found by address, for pointers the kernel did not get as arguments
(shared by the interpreter and the CPU backend).

A pointer table (grouped GEMM, MoE) is an int64 tensor of `data_ptr()`s: the kernel
loads real addresses and casts them to pointers. The backends resolve such an address
to the live host array whose memory holds it, so the access stays bounds-checked
against that array. Candidates are the live torch CPU tensors (their storages; torch
tensors are tracked by the garbage collector) and the numpy arrays reachable from the
Python stack of the launch (locals and globals of every frame, and two levels inside
their lists, tuples, dicts and objects' attributes; numpy arrays are not tracked by the
collector). An address in none of them stays unresolved and the access reports it.

Finding candidates means walking the collector's objects, ~50 ms in a process with
torch loaded, so the arrays found are kept in a process-wide index of weak
references (`_Index`), each checked again when it answers (alive, same memory). An
address the index cannot place first sends it to the youngest two collector
generations and the stack (where the tensors made since the last walk are, unless a
full collection promoted them: ~1 ms), and only then to a walk over every object.
"""
from __future__ import annotations

import bisect
import gc
import sys
import threading
import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional

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


def _numpy_range(a: np.ndarray) -> Optional[tuple[int, int]]:
    if a.dtype.hasobject or not (a.flags.c_contiguous or a.flags.f_contiguous) or a.nbytes == 0:
        return None
    return int(a.__array_interface__["data"][0]), int(a.nbytes)


def _numpy_entry(a: np.ndarray) -> Optional[HostArray]:
    a = _numpy_root(a)
    r = _numpy_range(a)
    if r is None:
        return None
    low, nbytes = r
    return HostArray(low, nbytes, a, bool(a.flags.writeable),
                     f"numpy array {a.dtype}{list(a.shape)} at {hex(low)} (found by address)")


def byte_span(a: np.ndarray) -> tuple[int, int]:
    """The bytes an array's elements cover, [low, high) relative to its element
    [0, ..., 0]: below it too for negative strides (a flipped view, or a pointer into
    the middle of an allocation, `runtime.args.anchored_view`); (0, 0) when empty."""
    if a.flags.c_contiguous:
        return 0, a.nbytes
    if not a.size:
        return 0, 0
    return (sum(min(0, (d - 1) * st) for d, st in zip(a.shape, a.strides)),
            sum(max(0, (d - 1) * st) for d, st in zip(a.shape, a.strides)) + a.itemsize)


def torch_storage_range(t: Any) -> Optional[tuple[int, int]]:
    """(real address, bytes) of a CPU tensor's storage; None where it has no host memory."""
    return _torch_range(t)


def _torch_range(t: Any) -> Optional[tuple[int, int]]:
    try:
        if t.device.type != "cpu" or t.is_sparse:
            return None
        storage = t.untyped_storage()
        if storage.device.type != "cpu":
            # a FakeTensor (torch.compile's tracing) says it is on the CPU, but its
            # storage is a meta one: address 0 and a size. Taken for host memory, it
            # "held" every small address, and the interpreter read there (a segfault).
            return None
        low, nbytes = int(storage.data_ptr()), int(storage.nbytes())
    except (RuntimeError, AttributeError, NotImplementedError):
        return None  # meta or functional tensors have no host memory
    return (low, nbytes) if nbytes and low else None


def _torch_entries(objects: Iterable[Any]) -> Iterator[HostArray]:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    tensor_cls = torch.Tensor
    seen: set[int] = set()
    for obj in [o for o in objects if isinstance(o, tensor_cls)]:
        r = _torch_range(obj)
        if r is None or r[0] in seen:
            continue
        seen.add(r[0])
        low, nbytes = r
        yield HostArray(low, nbytes, obj, True, f"torch tensor {str(obj.dtype).removeprefix('torch.')}"
                                                f"{list(obj.shape)} at {hex(low)} (found by address)")


def own_tensor_holding(obj: Any, address: int) -> Optional[HostArray]:
    """The CPU tensor among `obj`'s attributes (one level) whose storage holds
    `address`: a wrapper object's own memory (FlagGems' StridedBuffer keeps its base
    tensor), found without a search."""
    attrs = getattr(obj, "__dict__", None)
    if not attrs:
        return None
    for entry in _torch_entries(attrs.values()):
        if entry.low <= address < entry.low + entry.nbytes:
            return entry
    return None


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


def _quietly(found: Callable[[], Iterable[HostArray]]) -> list[HostArray]:
    with warnings.catch_warnings():
        # isinstance() / __dict__ read attributes that some deprecated objects warn about
        warnings.simplefilter("ignore")
        return list(found())


def _still(entry: HostArray) -> Optional[HostArray]:
    """`entry` with its owner, if the owner is alive and its memory where it was."""
    owner = entry.owner()
    if owner is None:
        return None
    r = _numpy_range(owner) if isinstance(owner, np.ndarray) else _torch_range(owner)
    if r != (entry.low, entry.nbytes):
        return None  # resized, or its storage replaced
    return entry._replace(owner=owner)


class _Index:
    """Host arrays by address, held weakly (`HostArray.owner` is a weak reference
    here); sorted by first byte."""

    def __init__(self) -> None:
        self.entries: list[HostArray] = []
        self.lows: list[int] = []
        self.lock = threading.Lock()
        self.full_walks = 0  # walks over every object (tests and benchmarks read it)

    def _put(self, found: list[HostArray], replace: bool, keep: Iterable[HostArray] = ()) -> None:
        """Add `found` (owners held strongly; stored weakly), after the entries kept:
        `keep` (weak) when `replace`, else every live one."""
        kept = {(e.low, e.nbytes): e for e in (keep if replace else self.entries) if e.owner() is not None}
        for e in found:
            try:
                kept[(e.low, e.nbytes)] = e._replace(owner=weakref.ref(e.owner))
            except TypeError:
                continue  # an owner without weak references is found again next time
        self.entries = sorted(kept.values(), key=lambda e: (e.low, -e.nbytes))
        self.lows = [e.low for e in self.entries]

    def _find(self, address: int) -> Optional[HostArray]:
        """The live array holding `address` (the widest of those starting nearest below)."""
        i = bisect.bisect_right(self.lows, address) - 1
        while i >= 0:
            e = self.entries[i]
            if e.low <= address < e.low + e.nbytes:
                live = _still(e)
                if live is not None:
                    return live
            if address - e.low > (1 << 32):
                break
            i -= 1
        return None

    def holding(self, addresses: Iterable[int]) -> dict[int, HostArray]:
        """The live host arrays holding `addresses`, by address (addresses no array
        holds are left out)."""
        with self.lock:
            found: dict[int, HostArray] = {}
            missing = list(addresses)
            # cheapest first: the tensors made lately (~0.1 ms), the stack's numpy arrays
            # (~1-15 ms, with the modules its frames reach), every tensor (~10-50 ms)
            young = lambda: _torch_entries(gc.get_objects(0) + gc.get_objects(1))  # noqa: E731
            refresh: list[Callable[[], None]] = [
                lambda: self._put(_quietly(young), replace=False),
                lambda: self._put(_quietly(_stack_numpy_entries), replace=False),
                self._walk_everything]
            while True:
                left = []
                for a in missing:
                    e = self._find(a)
                    if e is None:
                        left.append(a)
                    else:
                        found[a] = e
                if not left or not refresh:
                    return found
                refresh.pop(0)()
                missing = left

    def _walk_everything(self) -> None:
        self.full_walks += 1
        # the stack's arrays were just looked at: keep them, replace the tensors
        numpy = [e for e in self.entries if isinstance(e.owner(), np.ndarray)]
        self._put(_quietly(lambda: _torch_entries(gc.get_objects())), replace=True, keep=numpy)

    def everything(self) -> list[HostArray]:
        """Every live host array (a walk over all objects)."""
        with self.lock:
            self.full_walks += 1
            found = _quietly(lambda: _torch_entries(gc.get_objects())) + _quietly(_stack_numpy_entries)
            self._put(found, replace=True)
            return found


_INDEX = _Index()


def host_arrays_holding(addresses: Iterable[int]) -> dict[int, HostArray]:
    """The live host arrays (torch CPU tensors' storages, numpy arrays reachable from
    the stack) holding each of `addresses`; an address none holds is left out."""
    return _INDEX.holding(addresses)


def find_host_array(address: int) -> Optional[HostArray]:
    """The live host array holding `address`, or None."""
    return _INDEX.holding([address]).get(address)


def all_host_arrays() -> list[HostArray]:
    """Every live host array: for pointers whose addresses cannot be known before the
    launch (see `passes.pointer_table_arguments`)."""
    return _INDEX.everything()


def full_walks() -> int:
    """How many walks over every object the index has made in this process."""
    return _INDEX.full_walks
