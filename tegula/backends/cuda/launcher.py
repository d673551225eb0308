"""Launching a loaded kernel: argument packing, the stream, `cuLaunchKernel`.

The hot path is generated Python source, specialised per kernel signature once at load
time: one pre-built `void**` array whose ctypes slots are updated in place (the fastest
pure-Python pattern measured, see ANCHORS.md), the device addresses of torch tensors
taken from the JIT launch path (which read them for the alignment key), with
`pointer_of` for every other array kind (CuPy, `__cuda_array_interface__`,
`__dlpack__`) and for launches that hand over no addresses, the current torch/CuPy
stream, and no `inspect` or binding work.

Kernels that read tensor descriptors through TMA get one `CUtensorMap` per descriptor
after their own parameters (and checked mode's): encoded at launch from the argument
values (`tensormaps.TensorMapEncoder`, cached by base, shape and strides), its address
written into the parameter array.

In checked mode the launcher also fills the hidden parameters (an error buffer and each
pointer argument's byte extent), synchronises after the launch and raises
`OutOfBoundsError` / `DeviceAssertionError` naming the kernel line, program id and
offset of the first failure.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Callable, Optional, Sequence

from ...errors import DeviceAssertionError, KernelArgumentError, OutOfBoundsError
from ...ir.core import Loc
from ...ir.types import PointerType, ScalarType, parse_type
from . import driver as drv
from . import tensormaps
from .checked import ERROR_WORDS, KIND_ASSERT, KIND_NAMES
from .tensormaps import TensorMapEncoder
from .tma import TensorMapSpec
from .tma import source_text as tm_source

BIG_EXTENT = 1 << 62  # "unknown": never reported out of bounds


def slot_type(type_text: str) -> Any:
    """The ctypes type a kernel parameter of IR type `type_text` is passed as."""
    t = parse_type(type_text)
    if isinstance(t, PointerType):
        return ctypes.c_void_p
    assert isinstance(t, ScalarType), type_text
    if t.is_bool:
        return ctypes.c_int32
    if t.name == "f32":
        return ctypes.c_float
    if t.name == "f64":
        return ctypes.c_double
    if t.is_float:
        return ctypes.c_uint16 if t.bits == 16 else ctypes.c_uint8
    return getattr(ctypes, f"c_{'' if t.is_signed else 'u'}int{t.bits}")


def narrow_float_bits(value: float, type_text: str) -> int:
    """The bit pattern of a Python float as an f16/bf16/fp8 scalar argument."""
    import numpy as np

    from ...ir.numpy_ops import FP8_ENCODE, f32_to_bf16_bits
    if type_text == "f16":
        return int(np.array([value], np.float16).view(np.uint16)[0])
    if type_text == "bf16":
        return int(f32_to_bf16_bits(np.array([value], np.float32))[0])
    return int(FP8_ENCODE[type_text](np.array([value]))[0])


# ---------------------------------------------------------------- pointers of any array

def _dlpack_pointer(v: Any) -> int:
    capsule = v.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    managed = get(capsule, b"dltensor")
    # DLTensor: void* data (0), DLDevice (8), int32 ndim (16), dtype (20), shape (24),
    # strides (32), uint64 byte_offset (40)
    data = ctypes.c_void_p.from_address(managed).value or 0
    offset = ctypes.c_uint64.from_address(managed + 40).value
    return data + offset


def pointer_of(v: Any, name: str, kernel: str) -> int:
    """The device address of array argument `v` (the slow path of the launcher)."""
    if v is None:
        return 0
    if isinstance(v, int):
        return v
    if hasattr(v, "data_ptr"):
        dev = getattr(v, "device", None)
        if getattr(dev, "type", "cuda") != "cuda":
            raise _host_array(name, kernel)
        return int(v.data_ptr())
    cai = getattr(v, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    if hasattr(v, "__dlpack_device__"):
        if int(v.__dlpack_device__()[0]) not in (2, 3, 13):  # CUDA, CUDA host, CUDA managed
            raise _host_array(name, kernel)
        return _dlpack_pointer(v)
    if hasattr(v, "__array_interface__"):
        raise _host_array(name, kernel)
    raise KernelArgumentError(f"argument '{name}' of kernel '{kernel}' is a {type(v).__name__}, "
                              "not a GPU array (torch/CuPy tensor, __cuda_array_interface__, __dlpack__)")


def _host_array(name: str, kernel: str) -> KernelArgumentError:
    return KernelArgumentError(
        f"argument '{name}' of kernel '{kernel}' is in host memory, but the kernel runs on the GPU: "
        "pass GPU arrays for every pointer argument (or host arrays for all of them)")


def extent_of(v: Any) -> int:
    """Bytes an array view spans from its first element (checked mode)."""
    try:
        if hasattr(v, "stride") and hasattr(v, "element_size") and callable(v.stride):
            shape, strides, size = tuple(v.shape), tuple(v.stride()), v.element_size()
        elif hasattr(v, "strides") and hasattr(v, "itemsize"):
            shape, size = tuple(v.shape), v.itemsize
            strides = tuple(s // size for s in v.strides)
        else:
            return BIG_EXTENT
    except Exception:  # an array kind we cannot measure is not checked
        return BIG_EXTENT
    if any(d == 0 for d in shape):
        return 0
    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides) if s > 0)
    return span * size


# ---------------------------------------------------------------- streams

def stream_getter() -> Callable[[int], int]:
    """The current stream of the framework in use: torch's, else CuPy's, else 0."""
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw
        return lambda d: torch.cuda.current_stream(d).cuda_stream
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return lambda d: cupy.cuda.get_current_stream().ptr
    return lambda d: 0


# ---------------------------------------------------------------- the launcher

def make_launcher(function: Any, metadata: Any, arg_types: Sequence[str], device: int,
                  indices: Optional[Sequence[int]] = None,
                  arg_names: Optional[Sequence[str]] = None) -> Callable[[tuple, Sequence[Any]], None]:
    """`launch(grid, values)` for a loaded `function`: `values[indices[i]]` is the
    kernel's i-th parameter (default: `values` are exactly the parameters)."""
    md = metadata if isinstance(metadata, dict) else vars(metadata)
    name = md["name"]
    n = len(arg_types)
    indices = list(indices) if indices is not None else list(range(n))
    names = list(arg_names) if arg_names is not None else [f"arg{i}" for i in range(n)]
    checked = bool(md.get("checked"))
    pointer_args = [i for i, t in enumerate(arg_types) if t.startswith("ptr")]
    ctypes_of = [slot_type(t) for t in arg_types]
    if checked:
        ctypes_of += [ctypes.c_void_p] + [ctypes.c_int64] * len(pointer_args)
    slots = [t() for t in ctypes_of]
    maps = [TensorMapSpec.from_json(m) for m in md.get("tensormaps") or ()]
    params = (ctypes.c_void_p * max(1, len(slots) + len(maps)))(
        *[ctypes.addressof(s) for s in slots], *[None] * len(maps))
    cu = drv.cu()
    env: dict[str, Any] = {
        "_launch": cu.cuLaunchKernel, "_ok": cu.CUresult.CUDA_SUCCESS, "_fn": function,
        "_params": ctypes.addressof(params), "_keep": (params, slots), "_stream": stream_getter(),
        "_ptr": pointer_of, "_narrow": narrow_float_bits, "_fail": _launch_failed,
        "_KIND": name, "_DEV": device,
    }
    # The runtime hands over a 3-tuple; converting only non-int entries (numpy or
    # torch integers) keeps the common case free of three int() calls. `_p<k>` is the
    # device address the JIT launch path already read from the torch tensor given for
    # parameter k (None where it read none, and when the launch comes from elsewhere).
    # One per kernel parameter, constexpr ones included (the runtime passes one for each).
    n_params = max(len(md.get("param_names") or ()), max(indices) + 1 if indices else 0)
    pointer_params = "".join(f", _p{k}=None" for k in range(n_params))
    # `stream`: the stream to launch on (Triton's `CompiledKernel.run` passes one);
    # None means the current stream of the framework in use.
    lines = [f"def launch(grid, values{pointer_params}, *_more, stream=None):",
             "    gx, gy, gz = grid",
             "    if gx.__class__ is not int or gy.__class__ is not int or gz.__class__ is not int:",
             "        gx, gy, gz = int(gx), int(gy), int(gz)",
             "    if gx <= 0 or gy <= 0 or gz <= 0:",
             "        return"]
    for i, (t, idx) in enumerate(zip(arg_types, indices)):
        env[f"_s{i}"] = slots[i]
        if t.startswith("ptr"):
            lines += [f"    if _p{idx} is None:",
                      f"        _p{idx} = _ptr(values[{idx}], {names[i]!r}, _KIND)",
                      f"    _s{i}.value = _p{idx}"]
        elif t in ("f16", "bf16", "f8e4m3", "f8e5m2", "f8e4b15"):
            lines.append(f"    _s{i}.value = _narrow(values[{idx}], {t!r})")
        else:
            lines.append(f"    _s{i}.value = values[{idx}]")
    env["_params_arr"] = params
    for j, spec in enumerate(maps):
        # the map's address goes straight into the parameter array (the driver copies its
        # 128 bytes), from the argument values the slots above were just given
        env[f"_tm{j}"] = TensorMapEncoder(spec, name, tensormaps.encode_map).address
        parts = [tm_source(s, lambda i: f"_s{i}.value") for s in (spec.base, *spec.shape, *spec.strides)]
        n_dims = len(spec.shape)
        lines.append(f"    _params_arr[{len(slots) + j}] = _tm{j}({parts[0]}, ({', '.join(parts[1:1 + n_dims])},), "
                     f"({', '.join(parts[1 + n_dims:])},))")
    block = 32 * int(md["num_warps"])
    shared = int(md.get("shared") or 0)
    if checked:
        state = _CheckedState(md, slots[n:], [names[i] for i in pointer_args], device)
        env["_checked"] = state
        ptr_values = "".join(f"values[{indices[i]}], " for i in pointer_args)
        lines += ["    if stream is None:", "        stream = _stream(_DEV)",
                  f"    _checked.before(stream, ({ptr_values}))"]
    else:
        lines += ["    if stream is None:", "        stream = _stream(_DEV)"]
    lines += [f"    r = _launch(_fn, gx, gy, gz, {block}, 1, 1, {shared}, stream, _params, 0)",
              "    if r[0] != _ok:",
              "        _fail(r[0], _KIND)"]
    if checked:
        lines.append("    _checked.after(stream, (gx, gy, gz))")
    exec(compile("\n".join(lines), f"<tegula launcher {name}>", "exec"), env)
    launch = env["launch"]
    launch.accepts_pointers = True
    launch.accepts_stream = True
    return launch


def _launch_failed(err: Any, name: str) -> None:
    raise drv.CudaDriverError(f"launching kernel '{name}' failed: {drv.error_name(drv.cu(), err)}")


class _CheckedState:
    """The error buffer and extents of a checked-mode kernel."""

    def __init__(self, md: dict, slots: list, pointer_names: list[str], device: int):
        self.cu = drv.cu()
        self.name = md["name"]
        self.sites = md.get("checked_sites") or []
        self.slots = slots
        self.pointer_names = pointer_names
        self.buf = drv.check(self.cu.cuMemAlloc(8 * ERROR_WORDS), "cuMemAlloc")
        slots[0].value = int(self.buf)

    def before(self, stream: int, pointers: tuple) -> None:
        for slot, v in zip(self.slots[1:], pointers):
            slot.value = extent_of(v)
        drv.check(self.cu.cuMemsetD8Async(self.buf, 0, 8 * ERROR_WORDS, stream), "cuMemsetD8Async")

    def after(self, stream: int, grid: tuple) -> None:
        import numpy as np
        drv.check(self.cu.cuStreamSynchronize(stream), f"running kernel '{self.name}'")
        words = np.zeros(ERROR_WORDS, np.int64)
        drv.check(self.cu.cuMemcpyDtoH(words.ctypes.data, self.buf, 8 * ERROR_WORDS), "cuMemcpyDtoH")
        raise_recorded_error(words, self.sites, self.name)


def raise_recorded_error(words: Sequence[int], sites: Sequence[Sequence[Any]], kernel: str) -> None:
    """Raise the error a checked-mode kernel recorded (`checked.py` layout), if any."""
    kind = int(words[0])
    if kind == 0:
        return
    site = int(words[1])
    pid = (int(words[2]), int(words[3]), int(words[4]))
    offset = int(words[5])
    what, file, line, col, detail = sites[site] if site < len(sites) else ("?", "<unknown>", 0, 0, "")
    loc = Loc(file, int(line), int(col))
    if kind == KIND_ASSERT:
        raise DeviceAssertionError(f"device assertion failed in kernel '{kernel}': {detail}", loc, pid)
    raise OutOfBoundsError(
        f"out-of-bounds {KIND_NAMES.get(kind, what)} in kernel '{kernel}': pointer argument '{detail}' "
        f"accessed at element offset {offset}, outside the array", loc, pid)
