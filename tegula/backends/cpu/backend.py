"""The CPU backend behind the backend protocol (see `runtime/backend_registry`).

Compiling lowers the optimized tile IR to LLVM IR (`lower.py`, stage `llir`) and emits
host assembly (stage `asm`); loading JIT-compiles the module for the host CPU with its
features (MCJIT). A launch converts the arguments as the interpreter does (`HostArgs`:
zero-copy numpy views of host memory), packs them into 8-byte slots, and runs the grid's
linear program ids in chunks on a thread pool; the compiled code is called through
ctypes, which releases the GIL, so the chunks run in parallel. The first out-of-bounds
access stops the launch with an `OutOfBoundsError` worded as the interpreter's.
"""
from __future__ import annotations

import array
import ctypes
import hashlib
import math
import os
import struct
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Sequence

import numpy as np

from ...config import cpu_launch_knobs, knobs
from ...errors import DeviceAssertionError, KernelArgumentError, KernelRuntimeError, OutOfBoundsError
from ...ir.types import PointerType, element_of, parse_type
from ...passes import pointer_table_arguments
from ...passes.block_pointers_to_pointers import lower_block_pointers
from ...passes.descriptors_to_pointers import lower_descriptors
from ..compiler import GPUTarget
from ..host_arrays import byte_span
from ..llvm import host_jit
from .grid_pool import grid_pool
from .host_ranges import host_ranges
from .lower import lower
from .streaming_stores import STREAM_ARGS
from .tiles import ERR_EXTRA, ERR_LIST, ERR_PID, ERR_SITE, ERR_WORDS, Site

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)
_POOL_LOCK = threading.Lock()
_POOLS: dict[int, ThreadPoolExecutor] = {}


_CORES = os.cpu_count() or 1

# Chunks per thread of a launch: threads claim chunks until none is left (`grid_pool`),
# so more chunks balance programs of uneven cost and a worker that wakes late or shares
# its core; a claim is one compare-and-swap. At 2 threads, 1 / 8 / 32 chunks per thread
# measured softmax 1.82-1.90 / 1.83-1.95 / 1.80-1.83 ms, layer norm 1.05-1.13 / 1.08-1.12
# / 1.06, matmul 1024^3 12.2-12.7 / 11.4-12.8 / 11.1-12.5 (two quiet runs).
CHUNKS_PER_THREAD = 32


def threads() -> int:
    n = int(cpu_launch_knobs()[0] or 0)
    return n if n > 0 else _CORES


def _private_cache_bytes() -> int:
    """One core's L2 cache (sysfs), 1 MiB where unknown."""
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(root)):
            with open(os.path.join(root, entry, "level")) as f:
                if f.read().strip() != "2":
                    continue
            with open(os.path.join(root, entry, "size")) as f:
                text = f.read().strip()
            unit = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
            return int(text.rstrip("KM")) * unit
    except (OSError, ValueError):
        pass
    return 1 << 20


_PRIVATE_CACHE = _private_cache_bytes()


def stream_threshold(threads: int) -> int:
    """Bytes from which a written buffer's contiguous stores stream
    (`streaming_stores`): more than the private caches of the threads writing it hold
    (regular stores won below one core's 2 MiB L2 when measured, streaming above)."""
    return _PRIVATE_CACHE * max(threads, 1) if cpu_launch_knobs()[1] else 0


def _executor(n: int) -> ThreadPoolExecutor:
    with _POOL_LOCK:
        pool = _POOLS.get(n)
        if pool is None:
            pool = _POOLS[n] = ThreadPoolExecutor(n, thread_name_prefix="tegula-cpu")
        return pool


_UNCHECKED = "+unchecked"
# a float argument's bits: struct formats to pack it and read the bits back
_FLOAT_BITS = {"f64": ("<d", "<Q"), "f32": ("<f", "<I"), "f16": ("<e", "<H")}
_POINTER = object()  # the argument kind of pointers in CpuProgram.types


def _target() -> GPUTarget:
    # the object code is for this CPU and its features (both in the target, so in every
    # cache key: a cache shared by machines never hands one another's code); the
    # bounds-check knob changes the code too, so toggling it never reuses a kernel
    # compiled the other way
    cpu, features = host_jit.host_cpu()
    tag = hashlib.sha256(features.encode()).hexdigest()[:10]
    return GPUTarget("cpu", f"{cpu}-{tag}" + ("" if knobs.cpu_bounds_check else _UNCHECKED), 1)


def _checked(target: Any) -> bool:
    return not str(getattr(target, "arch", "")).endswith(_UNCHECKED)


def _target_machine() -> Any:
    # LLVM's tuning for AVX-512 hosts vectorizes loops on 256-bit registers (to spare
    # the clock drops of early AVX-512 parts); the CPU lowering's loops are mostly
    # arithmetic on rows in L1 (exp, sums, divisions), which run ~1.3x faster on
    # 512-bit registers on the hosts measured (docs/performance.md)
    return host_jit.target_machine(opt=3, features="-prefer-256-bit" if host_jit.simd_bytes() >= 64 else "")


_OBJECTS: "OrderedDict[str, tuple[bytes, str]]" = OrderedDict()
_OBJECTS_KEPT = 256


def _object_code(llir: str, assembly: bool) -> tuple[bytes, str]:
    """Object code (and host assembly) of `llir` for this host. The LLVM work (~90% of a
    compile) is remembered per module text within the process: the same kernel
    specialized alike lowers to the same text, so recompiling it (a new JIT function
    of the same source, another test's private disk cache) skips LLVM."""
    key = hashlib.sha256(llir.encode()).hexdigest()
    with _POOL_LOCK:
        hit = None if knobs.always_compile else _OBJECTS.get(key)
        if hit is not None and (hit[1] or not assembly):
            _OBJECTS.move_to_end(key)
            return hit
    # no loop unrolling: the loops are vectorized and interleaved already; unrolling
    # them tripled the object code and compile time (vector add: 12.8 -> 3.7 KB)
    out = host_jit.compile_object(llir, _target_machine(), 3, assembly, unroll=False)
    with _POOL_LOCK:
        _OBJECTS[key] = out
        while len(_OBJECTS) > _OBJECTS_KEPT:
            _OBJECTS.popitem(last=False)
    return out


def _table_positions(kernel: Any) -> Optional[list[int]]:
    names = pointer_table_arguments(kernel)
    if names is None:
        return None
    return sorted(list(kernel.arg_names).index(n) for n in names)


def compile_kernel(kernel: Any, checked: bool, debug: bool, assembly: bool = True) -> tuple[dict, dict]:
    """The CPU stages of `kernel` (`llir`, host `asm`, object code `obj`) and the
    metadata a launch needs without the IR (error sites, argument types, prints)."""
    # block pointers and descriptor accesses become pointer code (the host has no copy
    # engine to give them)
    module, lw = lower(lower_descriptors(lower_block_pointers(kernel)), checked=checked, debug=debug)
    llir = str(module)
    obj, asm = _object_code(llir, assembly)
    stages = {"llir": llir, "obj": obj}
    if assembly:
        stages["asm"] = asm
    md = {"shared": 0, "cpu_entry": kernel.name + ".range", "cpu_prints": lw.prints,
          "cpu_arg_types": [str(element_of(a.type)) for a in kernel.args],
          "cpu_arg_names": list(kernel.arg_names),
          "cpu_sites": [site.to_json() for site in lw.sites], "cpu_written": list(lw.written),
          "cpu_host_ranges": lw.uses_host_ranges,
          # the arguments whose values the kernel may use as addresses (None: unknown)
          "cpu_pointer_tables": _table_positions(kernel),
          # calls into the interpreter's scalar references (libdevice_more)
          "cpu_host_refs": "tegula_host_" in llir}
    return stages, md


class CpuBackend:
    name = "cpu"
    binary_stage = "obj"
    disk_cacheable = True

    # launch options the generated code does not depend on: the autotuner compiles and
    # times configs differing only in these once (runtime.autotuner.equivalent_configs)
    ignored_options = ("num_warps", "num_stages", "num_ctas", "maxnreg", "arch")

    # selected for host memory unless TEGULA_CPU_BACKEND=0 (or TEGULA_INTERPRET=1): the
    # registry asks `knobs.cpu_backend` at every launch (`backend_registry._host_backend`)
    opt_in = True

    def available(self) -> tuple[bool, str]:
        return True, ""

    def current_target(self, device: int) -> GPUTarget:
        return _target()

    def compile(self, kernel: Any, options: Any, target: GPUTarget, io: Any) -> tuple[dict, dict]:
        return compile_kernel(kernel, _checked(target), bool(options.debug))

    def load(self, compiled: Any, device: int):
        md = compiled.metadata
        program = CpuProgram.from_object(compiled.asm["obj"], md.__dict__)
        return program.launcher(md)


class CpuProgram:
    """A kernel compiled for the host; `run(grid, args)` runs it on numpy arrays and
    Python scalars, `launcher(metadata)` is the runtime's launch function."""

    compiled = 0  # programs made in this process (tests check their kernels ran here)

    def __init__(self, kernel: Any, checked: bool = True, debug: bool = False):
        stages, md = compile_kernel(kernel, checked, debug, assembly=False)
        self.llir = stages["llir"]
        self._setup(stages["obj"], md)

    @classmethod
    def from_object(cls, obj: bytes, md: dict) -> "CpuProgram":
        self = cls.__new__(cls)
        self._setup(obj, md)
        return self

    def _setup(self, obj: bytes, md: dict) -> None:
        CpuProgram.compiled += 1
        if md.get("cpu_host_refs"):
            from .libdevice_more import register_host_references
            register_host_references()  # before the object's symbols are resolved
        self.engine = host_jit.load_object(obj, _target_machine())
        self.fn_addr = self.engine.get_function_address(md["cpu_entry"])
        self.fn = _ENTRY(self.fn_addr)
        types = [element_of(parse_type(t)) for t in md["cpu_arg_types"]]
        self.types = [_POINTER if isinstance(t, PointerType) else t for t in types]
        self.arg_names = list(md["cpu_arg_names"])
        self.sites = [Site.from_json(x) for x in md["cpu_sites"]]
        self.prints = bool(md["cpu_prints"])
        self.written = list(md.get("cpu_written", range(len(self.types))))
        self.uses_host_ranges = bool(md.get("cpu_host_ranges", False))
        tables = md.get("cpu_pointer_tables")
        self.pointer_tables = None if tables is None else list(tables)

    def launcher(self, md: Any):
        from ...runtime.args import HostArgs

        indices = tuple(md.arg_indices)
        names = list(md.arg_names)
        written = [i for i, n in enumerate(names) if n in set(md.written_args)]
        host = HostArgs(md.name, names, written)

        def launch(grid: tuple, values: Sequence[Any]) -> None:
            try:
                gx, gy, gz = (int(d.__index__()) for d in grid)
            except (AttributeError, TypeError, ValueError):
                raise KernelArgumentError(f"grid of kernel '{md.name}' must hold 3 integers, got {grid!r}") from None
            if min(gx, gy, gz) < 0:
                raise KernelArgumentError(f"grid of kernel '{md.name}' has a negative size: {(gx, gy, gz)}")
            total = gx * gy * gz
            if total == 0:
                return
            args, writebacks = host.convert([values[i] for i in indices])
            self.run((gx, gy, gz), args)
            for wb in writebacks:
                wb()
        return launch

    def _pack(self, args: Sequence[Any], stream_bytes: int = 0) -> tuple[array.array, array.array, list]:
        """The argument slots (8 bytes each); `sizes`: each pointer's byte range [lo,
        hi), the no-overlap word, the stream word (written buffers of at least
        `stream_bytes` bytes stream their stores; 0: none), then the host arrays a loaded
        pointer may reach, when the kernel needs them; and those arrays (keep them alive
        while the kernel runs)."""
        n = max(len(self.types), 1)
        slots = [0] * n
        sizes = [0] * (2 * n + 2)
        known = set()  # pointer arguments whose byte range is known
        for i, (t, v) in enumerate(zip(self.types, args)):
            if t is _POINTER:
                if v is None:
                    known.add(i)
                    continue
                if isinstance(v, np.ndarray):
                    slots[i] = v.__array_interface__["data"][0]
                    sizes[2 * i], sizes[2 * i + 1] = byte_span(v)
                    known.add(i)
                else:
                    slots[i] = int(v)
                continue
            if t.is_float:
                fmt = _FLOAT_BITS.get(t.name)
                if fmt is not None:
                    try:
                        slots[i] = struct.unpack(fmt[1], struct.pack(fmt[0], v))[0]
                    except OverflowError:  # beyond the type's range: inf, as numpy rounds it
                        slots[i] = struct.unpack(fmt[1], struct.pack(fmt[0], math.copysign(math.inf, v)))[0]
                else:
                    import ml_dtypes

                    dt = {"bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
                          "f8e5m2": ml_dtypes.float8_e5m2}[t.name]
                    arr = np.array([v], dt)
                    slots[i] = int(arr.view(np.uint16 if arr.itemsize == 2 else np.uint8)[0])
            else:
                slots[i] = int(v) & ((1 << 64) - 1)
        sizes[2 * n] = int(self._no_overlap(slots, sizes, known))
        if stream_bytes:
            sizes[2 * n + 1] = sum(1 << w for w in self.written if w < STREAM_ARGS and w in known
                                   and sizes[2 * w + 1] - sizes[2 * w] >= stream_bytes)
        entries = []
        if self.uses_host_ranges:
            # then the live host arrays a pointer loaded from memory may point into
            ranges = [(slots[k] + sizes[2 * k], slots[k] + sizes[2 * k + 1]) for k in known if slots[k]]
            entries = host_ranges(self.pointer_tables, [t is _POINTER for t in self.types], args, ranges)
            sizes.append(len(entries))
            for e in entries:
                sizes += [e.low, e.low + e.nbytes]
        return array.array("Q", slots), array.array("q", sizes), entries

    def _no_overlap(self, slots: list, sizes: list, known: set) -> bool:
        """No buffer a store may write overlaps another pointer argument's buffer (the
        condition for reading loads of the other buffers in place)."""
        ptrs = [i for i, t in enumerate(self.types) if t is _POINTER and slots[i]]
        for w in self.written:
            if not slots[w]:
                continue
            if w not in known:
                return False
            wlo, whi = slots[w] + sizes[2 * w], slots[w] + sizes[2 * w + 1]
            for a in ptrs:
                if a == w:
                    continue
                if a not in known:
                    return False
                if slots[a] + sizes[2 * a] < whi and wlo < slots[a] + sizes[2 * a + 1]:
                    return False
        return True

    def run(self, grid: Sequence[int], args: Sequence[Any]) -> None:
        """Run the grid (up to 3 sizes) on converted arguments (numpy arrays, scalars)."""
        gx, gy, gz = tuple(int(g) for g in grid) + (1,) * (3 - len(tuple(grid)))
        total = gx * gy * gz
        if total == 0:
            return
        # `args` keeps the arrays alive until the call returns
        width = threads()
        n = min(width, total)
        slots, sizes, _found = self._pack(args, stream_threshold(n))  # _found: alive until the end
        a, s = slots.buffer_info()[0], sizes.buffer_info()[0]
        chunks = 1 if n <= 1 else min(total, n * CHUNKS_PER_THREAD)
        err = array.array("q", bytes(8 * ERR_WORDS * chunks))
        e0, stride = err.buffer_info()[0], ERR_WORDS * 8
        pool = grid_pool(width) if chunks > 1 else None
        if chunks == 1 or (pool is not None and not pool.run(self.fn_addr, a, s, total, chunks, (gx, gy, gz),
                                                            e0, stride)):
            # one thread, or another thread's launch holds the pool: run here, in one chunk
            # (its error record is the first one's)
            chunks = 1
            self.fn(a, s, 0, total, gx, gy, gz, e0)
        elif pool is None:
            self._run_on_executor(n, chunks, a, s, total, (gx, gy, gz), e0, stride)
        if self.prints:
            host_jit.libc().fflush(None)  # device_print's lines, before Python writes anything
        for k in range(chunks):
            if err[k * ERR_WORDS]:
                raise self._error(err[k * ERR_WORDS:(k + 1) * ERR_WORDS], args)

    def _run_on_executor(self, n: int, chunks: int, a: int, s: int, total: int, grid: tuple, e0: int,
                         stride: int) -> None:
        """The chunks on a `ThreadPoolExecutor` (hosts without `grid_pool`): static
        chunks, the calling thread running the first."""
        bounds = [total * k // chunks for k in range(chunks + 1)]
        futures = [_executor(n).submit(self.fn, a, s, bounds[k], bounds[k + 1], *grid, e0 + k * stride)
                   for k in range(1, chunks)]
        try:
            self.fn(a, s, bounds[0], bounds[1], *grid, e0)
        finally:
            for f in futures:
                f.result()

    def _error(self, err: np.ndarray, args: Sequence[Any]) -> Exception:
        site = self.sites[int(err[ERR_SITE])]
        pid = tuple(int(x) for x in err[ERR_PID:ERR_PID + 3])
        loc = site.loc if site.loc is not None and site.loc.line > 0 else None
        if site.kind == "assert":
            return DeviceAssertionError(site.type_name, loc=loc, pid=pid)
        if site.kind == "assert_tile":
            n_bad, first, total = (int(x) for x in err[ERR_EXTRA:ERR_EXTRA + 3])
            idx = tuple(int(i) for i in np.unravel_index(first, site.shape))
            return DeviceAssertionError(f"{site.type_name} (first failing element at index {idx}; "
                                        f"{n_bad} of {total} failed)", loc=loc, pid=pid)
        if site.kind == "runtime":
            return KernelRuntimeError(site.type_name, loc=loc, pid=pid)
        n_bad, n_active, first = (int(x) for x in err[ERR_EXTRA:ERR_EXTRA + 3])
        offsets = err[ERR_EXTRA + 3:ERR_EXTRA + 3 + min(n_bad, ERR_LIST)]
        arg = site.arg
        where = ""
        if site.shape:
            where = f"; first at tile index {tuple(int(i) for i in np.unravel_index(first, site.shape))}"
        if arg is None:
            shown = ", ".join(hex(int(a) & 0xFFFFFFFFFFFFFFFF) for a in offsets)
            return OutOfBoundsError(f"{site.kind} through a pointer that points into no argument buffer "
                                    f"(addresses [{shown}{', ...' if n_bad > ERR_LIST else ''}]){where}",
                                    loc=loc, pid=pid)
        name = self.arg_names[arg] if arg < len(self.arg_names) else f"#{arg}"
        buf = args[arg]
        size = site.elem_bytes
        # offsets come relative to the argument's pointer; the buffer may start below it
        low, high = byte_span(buf) if isinstance(buf, np.ndarray) else (0, 0)
        count = (high - low) // size
        shown = ", ".join(str((int(o) - low) // size) for o in offsets)
        shown = "[" + shown + (", ..." if n_bad > ERR_LIST else "") + "]"
        msg = (f"out-of-bounds {site.kind} through pointer argument '{name}': "
               f"{n_bad} of {n_active} accessed {site.type_name} elements lie outside the buffer of "
               f"{count} elements; element offsets from the buffer start: {shown}{where}")
        return OutOfBoundsError(msg, loc=loc, pid=pid)


def make_backend() -> CpuBackend:
    return CpuBackend()
