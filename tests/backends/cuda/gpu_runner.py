"""Running hand-built kernels on a real GPU through the backend's own compile, load and
launch path (`compile_kernel`, `driver.load_function`, the generated launcher) with
torch CUDA tensors:
- `run_case` runs a `cuda_kernels.Case` (the GPU tests, `benchmarks/gpu_smoke.py`);
- `run_on_gpu` runs a kernel on host arguments the way the interpreter takes them
  (numpy arrays — views, odd strides and aliasing included — CPU torch tensors and
  scalars) and copies what the kernel wrote back into those arrays in place (the
  numerical suite's "cuda" backend, `tests/numerics/numerics_backends.py`).
"""
from __future__ import annotations

import ctypes
import time
from typing import Any, Sequence

import numpy as np

from tegula.backends.cuda import compile_kernel, driver
from tegula.backends.cuda.launcher import make_launcher
from tegula.ir.printer import print_ir


def has_torch_gpu() -> bool:
    """Whether torch is installed and sees a CUDA GPU (the GPU tests' skip condition)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def to_device(args: list, torch: Any) -> list:
    return [torch.from_numpy(np.ascontiguousarray(a)).cuda() if isinstance(a, np.ndarray) else a
            for a in args]


def run_case(case: Any, torch: Any, debug: bool = False, timing: bool = False) -> tuple[list, dict]:
    """Compile for the current GPU, launch once on copies of the case's inputs, and
    return (the arguments back on the host as numpy, info)."""
    dev = torch.cuda.current_device()
    cap = driver.capability(dev)
    t0 = time.perf_counter()
    asm, md = compile_kernel(case.kernel, {"num_warps": case.num_warps, "debug": debug, "checked": debug}, cap)
    compile_s = time.perf_counter() - t0
    image = asm.get("cubin") or (asm["ptx"].encode() + b"\0")
    _module, fn = driver.load_function(image, md["name"], dev, int(md["shared"]))
    launch = make_launcher(fn, md, md["arg_types"], dev)
    host = case.inputs(np.random.default_rng(1))
    dargs = to_device(host, torch)
    launch(case.grid, dargs)
    torch.cuda.synchronize()
    info = {"compile_s": compile_s, "n_regs": md.get("n_regs"), "n_spills": md.get("n_spills"),
            "shared": md.get("shared"), "cap": cap}
    if timing:
        reps = 20
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            launch(case.grid, dargs)
        info["host_launch_us"] = (time.perf_counter() - t0) / reps * 1e6
        torch.cuda.synchronize()
    out = [a.cpu().numpy() if hasattr(a, "cpu") else a for a in dargs]
    return out, info


def expected(case: Any) -> dict:
    """What the case must produce: the interpreter's result (numpy reference for cases
    marked reference-only)."""
    with np.errstate(all="ignore"):
        if case.extra.get("reference_only"):
            return case.reference(case.inputs(np.random.default_rng(1)))
        from tegula.backends.interpreter import execute
        args = case.inputs(np.random.default_rng(1))
        execute(case.kernel, case.grid, args)
        return {i: args[i] for i in case.outputs}


def compare(case: Any, got: list, want: dict) -> list[str]:
    """Mismatch descriptions (empty when everything matches)."""
    problems = []
    for i, w in want.items():
        g, w = np.asarray(got[i]), np.asarray(w)
        if case.rtol == 0 and case.atol == 0:
            bad = g.reshape(-1) != w.astype(g.dtype).reshape(-1)
            if g.dtype.kind == "f":
                bad &= ~(np.isnan(g.reshape(-1)) & np.isnan(w.reshape(-1).astype(g.dtype)))
        else:
            bad = ~np.isclose(g.astype(np.float64).reshape(-1), w.astype(np.float64).reshape(-1),
                              rtol=case.rtol, atol=case.atol, equal_nan=True)
        if bad.any():
            idx = np.nonzero(bad)[0][:5]
            problems.append(f"arg {i}: {int(bad.sum())} of {bad.size} differ, e.g. at {idx.tolist()}: "
                            f"got {g.reshape(-1)[idx].tolist()} want {w.reshape(-1)[idx].tolist()}")
    return problems


# ---------------------------------------------------------------- host arguments on the GPU

_LOADED: dict[tuple, tuple[Any, Any, dict]] = {}


def load_kernel(kernel: Any, num_warps: int, debug: bool, torch: Any) -> tuple[Any, dict]:
    """(launcher, metadata) of `kernel` compiled for the current GPU and loaded, once
    per kernel text (with locations: checked mode reports them), warps and debug."""
    dev = torch.cuda.current_device()
    key = (print_ir(kernel, locs=True), num_warps, debug, dev)
    if key not in _LOADED:
        opts = {"num_warps": num_warps, "debug": debug, "checked": debug}
        asm, md = compile_kernel(kernel, opts, driver.capability(dev))
        image = asm.get("cubin") or (asm["ptx"].encode() + b"\0")
        module, fn = driver.load_function(image, md["name"], dev, int(md["shared"]))
        launch = make_launcher(fn, md, md["arg_types"], dev, arg_names=list(kernel.arg_names))
        _LOADED[key] = (module, launch, md)  # the module stays loaded while cached
    _module, launch, md = _LOADED[key]
    return launch, md


def _host_view(a: Any) -> tuple[int, int, int, int]:
    """(first element's address, lowest byte address, end byte address, item size) of
    a host array: a numpy array or a CPU torch tensor, any strides."""
    if isinstance(a, np.ndarray):
        first, size, shape, strides = int(a.ctypes.data), a.itemsize, a.shape, a.strides
    else:
        size = a.element_size()
        first, shape, strides = int(a.data_ptr()), tuple(a.shape), [st * size for st in a.stride()]
    if any(d == 0 for d in shape):
        return first, first, first, size
    lo = first + sum(min(0, (d - 1) * st) for d, st in zip(shape, strides))
    hi = first + size + sum(max(0, (d - 1) * st) for d, st in zip(shape, strides))
    return first, lo, hi, size


def _is_host_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) or (hasattr(a, "data_ptr") and getattr(a, "is_cuda", True) is False)


_INT_OF_SIZE = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def run_on_gpu(kernel: Any, grid: Sequence[int], args: Sequence[Any], torch: Any,
               num_warps: int = 4, debug: bool = False) -> None:
    """Launch `kernel` on the GPU with host arguments, as the interpreter would run it.

    The host memory the array arguments span is merged into regions (so aliasing
    arguments alias on the device too), each copied to a device buffer at the same
    address modulo 256 (alignment is observable through ptr_to_int); each array is
    passed as a torch CUDA tensor starting at its first element and spanning its
    forward extent (what checked mode bounds). Regions the kernel changed are copied
    back in place."""
    launch, _md = load_kernel(kernel, num_warps, debug, torch)
    views = [_host_view(a) if _is_host_array(a) else None for a in args]
    spans = sorted((v[1], v[2]) for v in views if v is not None)
    regions: list[list[int]] = []
    for lo, hi in spans:
        if regions and lo <= regions[-1][1]:
            regions[-1][1] = max(regions[-1][1], hi)
        else:
            regions.append([lo, hi])
    device = []  # (region lo, region hi, pad, device bytes)
    for lo, hi in regions:
        pad = lo % 256
        buf = torch.zeros(pad + (hi - lo) + 1, dtype=torch.uint8, device="cuda")
        if hi > lo:
            buf[pad:pad + hi - lo].copy_(torch.from_numpy(_bytes_at(lo, hi - lo)))
        device.append((lo, hi, pad, buf))
    values = []
    for a, v in zip(args, views):
        if v is None:
            values.append(a)
            continue
        first, lo, hi, size = v
        r_lo, _r_hi, pad, buf = next(d for d in device if d[0] <= lo and hi <= d[1])
        off = pad + first - r_lo
        forward = max(0, hi - first)
        dtype = getattr(torch, _INT_OF_SIZE.get(size, "uint8"))
        flat = buf[off:off + forward]
        typed = size in _INT_OF_SIZE and forward % size == 0 and first % size == 0
        values.append(flat.view(dtype) if typed else flat)
    launched = False
    try:
        launch(tuple(grid), values)  # checked mode raises its error after the launch
        torch.cuda.synchronize()
        launched = True
    finally:
        _flush_c_stdout()  # device_print's lines reach the C stdout at the synchronisation
        try:
            # also after a checked-mode error: what the good programs wrote is kept, as
            # on the host backends
            for lo, hi, pad, buf in device:
                if hi > lo:
                    host = _bytes_at(lo, hi - lo)
                    new = buf[pad:pad + hi - lo].cpu().numpy()
                    if not np.array_equal(host, new):
                        host[:] = new
        except Exception:
            if launched:  # else the launch's own error is the one to see
                raise


def _bytes_at(address: int, n: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(address))


def _flush_c_stdout() -> None:
    ctypes.CDLL(None).fflush(None)
