"""What a launch argument means to the compiler: Triton 3.6's specialization rules.

Each argument maps to a small hashable *spec* `(kind, extra, where)`; the tuple of specs
(plus constexpr values and options) is the in-memory cache key, and on a cache miss the
specs become the compiler's `signature`, `constexprs` and `arg_attrs`:

| argument                          | spec                          | signature   |
|-----------------------------------|-------------------------------|-------------|
| array/tensor of dtype float32     | `("*fp32", div, device)`      | `*fp32`     |
| `None`                            | `("constexpr", None, ...)`    | `constexpr` |
| `bool`                            | `("i1", 1, None)`             | `i1`        |
| int `== 1` (specialized)          | `("constexpr", 1, int)`       | `constexpr` |
| int in int32 range                | `("i32", div, None)`          | `i32`       |
| int in [2**63, 2**64)             | `("u64", div, None)`          | `u64`       |
| any other int                     | `("i64", div, None)`          | `i64`       |
| Python float                      | `("fp32", 1, None)`           | `fp32`      |
| constexpr parameter value `v`     | `("constexpr", v, type(v))`   | `constexpr` |

`div` is, for an int, the largest power of two up to 16 that divides it (1, 2, 4, 8 or
16: Triton only tells 16 from 1, which loses 16-byte vectors on a row stride of 3000
halves), and for a pointer 16 when its address is 16-byte aligned, else 1 (unless the
parameter is in `do_not_specialize_on_alignment`: then 1); parameters in
`do_not_specialize` get neither `== 1` nor divisibility. `device` is -1 for host memory,
the CUDA ordinal for GPU memory, and `NEUTRAL_DEVICE` for a `MockTensor` (warmup by
dtype). The JIT's generated launcher inlines the int/float/tensor cases of
`spec_value`; the two must agree (tests check it).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ..errors import KernelArgumentError
from ..ir.core import ArgAttrs
from .arg_trees import is_tree_spec, leaf_specs, leaf_values, signature_of, spec_descriptor, spec_tuple

CPU_DEVICE = -1
NEUTRAL_DEVICE = -2

# Spec constants shared with the generated launcher (identity does not matter, equality does).
SPEC_ONE = ("constexpr", 1, int)
SPEC_NONE = ("constexpr", None, type(None))
SPEC_I1 = ("i1", 1, None)
SPEC_FP32 = ("fp32", 1, None)

# ---------------------------------------------------------------------------- dtypes

# Every spelling of an element type (torch/numpy/ml_dtypes names, Triton's tl names, the
# IR's names) -> Triton's canonical signature name.
_DTYPE_NAMES = {
    "bool": "i1", "bool_": "i1", "int1": "i1", "i1": "i1", "u1": "i1",
    "int8": "i8", "i8": "i8", "int16": "i16", "i16": "i16", "short": "i16",
    "int32": "i32", "i32": "i32", "int": "i32", "int64": "i64", "i64": "i64", "long": "i64",
    "uint8": "u8", "u8": "u8", "uint16": "u16", "u16": "u16",
    "uint32": "u32", "u32": "u32", "uint64": "u64", "u64": "u64",
    "float16": "fp16", "half": "fp16", "fp16": "fp16", "f16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float32": "fp32", "float": "fp32", "fp32": "fp32", "f32": "fp32",
    "float64": "fp64", "double": "fp64", "fp64": "fp64", "f64": "fp64",
    "float8_e4m3fn": "fp8e4nv", "float8e4nv": "fp8e4nv", "fp8e4nv": "fp8e4nv", "f8e4m3": "fp8e4nv",
    "float8_e5m2": "fp8e5", "float8e5": "fp8e5", "fp8e5": "fp8e5", "f8e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "fp8e4b8": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16", "fp8e5b16": "fp8e5b16",
    "float8_e4m3b11fnuz": "fp8e4b15", "fp8e4b15": "fp8e4b15",
}

_dtype_sig_cache: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """Triton's name (`fp32`, `bf16`, `i8`, `fp8e4nv`, ...) of a torch, numpy, ml_dtypes
    or tl dtype, or of a string spelling one. Raises KernelArgumentError if unsupported."""
    try:
        return _dtype_sig_cache[dtype]
    except (KeyError, TypeError):
        pass
    if isinstance(dtype, str):
        text = dtype
    else:
        text = getattr(dtype, "name", None)
        if not isinstance(text, str):
            text = str(dtype)
    text = text.strip().rsplit(".", 1)[-1]
    name = _DTYPE_NAMES.get(text)
    if name is None:
        raise KernelArgumentError(f"unsupported element type {dtype!r} for a kernel pointer argument")
    try:
        _dtype_sig_cache[dtype] = name
    except TypeError:
        pass
    return name


PTR_SIGNATURES: dict[Any, str] = {}


def pointer_signature(dtype: Any) -> str:
    """`*fp32` etc. for a pointer to `dtype` (memoized per dtype object: launches use it)."""
    try:
        return PTR_SIGNATURES[dtype]
    except (KeyError, TypeError):
        pass
    sig = "*" + dtype_name(dtype)
    try:
        PTR_SIGNATURES[dtype] = sig
    except TypeError:
        pass
    return sig


# ---------------------------------------------------------------------------- spec handlers

class UnsupportedArgument(Exception):
    """Raised by `spec_value` for a value no kernel parameter can take; the JIT turns it
    into a KernelArgumentError naming the parameter."""

    def __init__(self, value: Any, why: str = ""):
        self.value = value
        self.why = why
        super().__init__(why or type(value).__name__)


class ArgumentOverflow(UnsupportedArgument):
    """An int that fits no 64-bit parameter (the JIT raises KernelArgumentOverflow)."""


def pow2_divisor(x: int) -> int:
    """The largest power of two, at most 16, dividing `x` (16 for 0)."""
    low = x & 15
    return 16 if low == 0 else low & -low


_INT_KINDS = ("i32", "i64", "u64")
_INT_SPECS = {sig: {d: (sig, d, None) for d in (1, 2, 4, 8, 16)} for sig in _INT_KINDS}
SPEC_I32 = _INT_SPECS["i32"][1]
SPEC_I32_16 = _INT_SPECS["i32"][16]
# the spec of an int32 by its low four bits (what the generated launcher indexes)
SPEC_I32_BY_LOW_BITS = tuple(_INT_SPECS["i32"][pow2_divisor(i)] for i in range(16))


def spec_int(x: int, specialize: bool, align: bool) -> tuple:
    if specialize and x == 1:
        return SPEC_ONE
    div = pow2_divisor(x) if specialize and align else 1
    if -0x80000000 <= x <= 0x7FFFFFFF:
        return _INT_SPECS["i32"][div]
    if -0x8000000000000000 <= x <= 0x7FFFFFFFFFFFFFFF:
        return _INT_SPECS["i64"][div]
    if 0x8000000000000000 <= x <= 0xFFFFFFFFFFFFFFFF:
        return _INT_SPECS["u64"][div]
    raise ArgumentOverflow(x, f"the int {x} does not fit in 64 bits (int64 or uint64)")


def _spec_bool(x: Any, specialize: bool, align: bool) -> tuple:
    return SPEC_I1


def _spec_float(x: Any, specialize: bool, align: bool) -> tuple:
    return SPEC_FP32


def _spec_none(x: Any, specialize: bool, align: bool) -> tuple:
    return SPEC_NONE


def _aligned(address: int, specialize: bool, align: bool) -> int:
    return 16 if specialize and align and address % 16 == 0 else 1


def _spec_numpy(a: Any, specialize: bool, align: bool) -> tuple:
    if a.dtype.byteorder == ">":
        raise UnsupportedArgument(a, "big-endian arrays are not supported")
    return (pointer_signature(a.dtype), _aligned(a.ctypes.data, specialize, align), CPU_DEVICE)


def spec_torch(t: Any, specialize: bool, align: bool) -> tuple:
    """A torch tensor (any device). Also inlined by the generated launcher."""
    dt = t.dtype
    sig = PTR_SIGNATURES.get(dt) or pointer_signature(dt)
    return (sig, _aligned(t.data_ptr(), specialize, align), t.get_device())


def _spec_numpy_scalar(x: Any, specialize: bool, align: bool) -> tuple:
    import numpy as np

    if isinstance(x, np.bool_):
        return SPEC_I1
    if isinstance(x, np.integer):
        return spec_int(int(x), specialize, align)
    if isinstance(x, np.floating):
        return ("fp16", 1, None) if x.dtype == np.float16 else SPEC_FP32
    raise UnsupportedArgument(x, f"numpy scalars of type {type(x).__name__} are not supported")


def _spec_cuda_interface(x: Any, specialize: bool, align: bool) -> tuple:
    import numpy as np

    iface = x.__cuda_array_interface__
    sig = pointer_signature(np.dtype(iface["typestr"]))
    device = getattr(getattr(x, "device", None), "id", None)
    return (sig, _aligned(iface["data"][0], specialize, align), int(device) if device is not None else 0)


def _spec_array_interface(x: Any, specialize: bool, align: bool) -> tuple:
    import numpy as np

    return _spec_numpy(np.asarray(x), specialize, align)


def _spec_dlpack(x: Any, specialize: bool, align: bool) -> tuple:
    kind, ordinal = x.__dlpack_device__()
    if int(kind) == 1:  # kDLCPU
        import numpy as np

        return _spec_numpy(np.from_dlpack(x), specialize, align)
    if int(kind) == 2 and "torch" in sys.modules:  # kDLCUDA
        import torch

        return spec_torch(torch.from_dlpack(x), specialize, align)
    raise UnsupportedArgument(x, f"DLPack device type {kind} is not supported")


def _spec_duck_tensor(x: Any, specialize: bool, align: bool) -> tuple:
    # Triton's rule: anything with .data_ptr() and .dtype is a pointer (TensorWrapper,
    # MockTensor and user wrappers).
    device = getattr(x, "device", None)
    dev_type = getattr(device, "type", device)
    if dev_type is None:
        dev = NEUTRAL_DEVICE if getattr(x, "_tegula_mock", False) else CPU_DEVICE
    elif str(dev_type).startswith("cuda"):
        dev = getattr(device, "index", None) or 0
    else:
        dev = CPU_DEVICE
    return (pointer_signature(x.dtype), _aligned(x.data_ptr(), specialize, align), dev)


def _spec_constexpr_obj(x: Any, specialize: bool, align: bool) -> tuple:
    return constexpr_spec(x.value)


def _spec_jit(x: Any, specialize: bool, align: bool) -> tuple:
    return ("constexpr", x, type(x))


def _spec_tuple(x: Any, specialize: bool, align: bool) -> tuple:
    return spec_tuple(x, specialize, align, spec_value)


def _spec_descriptor(x: Any, specialize: bool, align: bool) -> tuple:
    return spec_descriptor(x, specialize, align, spec_value)


_PLAIN = (int, bool, float, str, type(None))


def constexpr_spec(v: Any) -> tuple:
    """The spec of a constexpr value. The value's type is part of it so that 1, True and
    1.0 (equal in Python) compile separately."""
    if getattr(v, "_tegula_constexpr", False) or type(v).__name__ == "constexpr":
        v = getattr(v, "value", v)
    if type(v) in _PLAIN:
        return ("constexpr", v, type(v))
    try:
        hash(v)
    except TypeError:
        return ("constexpr", ("<unhashable>", repr(v)), type(v))
    return ("constexpr", v, type(v))


def constexpr_atoms(v: Any) -> tuple[Any, type]:
    """(value, type) that stand for a constexpr value in a cache key (the launcher's
    form of `constexpr_spec`)."""
    spec = constexpr_spec(v)
    return spec[1], spec[2]


_HANDLERS: dict[type, Callable[[Any, bool, bool], tuple]] = {
    int: spec_int, bool: _spec_bool, float: _spec_float, type(None): _spec_none,
}


def _find_handler(cls: type) -> Callable[[Any, bool, bool], tuple]:
    """Classify a class once; the result is cached in `_HANDLERS`."""
    handler: Optional[Callable[[Any, bool, bool], tuple]] = None
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    if np is not None and issubclass(cls, np.ndarray):
        handler = _spec_numpy
    elif torch is not None and issubclass(cls, torch.Tensor):
        handler = spec_torch
    elif issubclass(cls, bool):
        handler = _spec_bool
    elif np is not None and issubclass(cls, np.generic):
        handler = _spec_numpy_scalar
    elif issubclass(cls, int):
        handler = lambda x, s, a: spec_int(int(x), s, a)  # noqa: E731 (int subclasses: IntEnum...)
    elif issubclass(cls, float):
        handler = _spec_float
    elif getattr(cls, "_tegula_jit", False):
        handler = _spec_jit
    elif issubclass(cls, tuple):
        handler = _spec_tuple
    elif getattr(cls, "_tegula_host_descriptor", False):
        handler = _spec_descriptor
    elif cls.__name__ == "constexpr" and cls.__module__.startswith(("tegula.", "triton.")):
        handler = _spec_constexpr_obj
    elif hasattr(cls, "__cuda_array_interface__"):
        handler = _spec_cuda_interface
    elif hasattr(cls, "data_ptr") and (hasattr(cls, "dtype") or "dtype" in getattr(cls, "__slots__", ())):
        handler = _spec_duck_tensor
    elif hasattr(cls, "__array_interface__"):
        handler = _spec_array_interface
    elif hasattr(cls, "__dlpack__") and hasattr(cls, "__dlpack_device__"):
        handler = _spec_dlpack
    if handler is None:
        return _unsupported
    _HANDLERS[cls] = handler
    return handler


def _unsupported(x: Any, specialize: bool, align: bool) -> tuple:
    # The class did not say; the instance may (interfaces set as instance attributes).
    if hasattr(x, "__cuda_array_interface__"):
        return _spec_cuda_interface(x, specialize, align)
    if hasattr(x, "data_ptr") and hasattr(x, "dtype"):
        return _spec_duck_tensor(x, specialize, align)
    if hasattr(x, "__array_interface__"):
        return _spec_array_interface(x, specialize, align)
    raise UnsupportedArgument(x)


def spec_value(x: Any, specialize: bool = True, align: bool = True) -> tuple:
    """The spec of one runtime (non-constexpr) argument; see the module docstring."""
    handler = _HANDLERS.get(x.__class__)
    if handler is None:
        handler = _find_handler(x.__class__)
    return handler(x, specialize, align)


def describe_value(x: Any) -> str:
    """How an argument is named in error messages: its type, and dtype/device if any."""
    kind = type(x).__name__
    mod = type(x).__module__
    if mod not in ("builtins",):
        kind = f"{mod.split('.')[0]}.{kind}"
    dtype = getattr(x, "dtype", None)
    device = getattr(x, "device", None)
    extra = []
    if dtype is not None:
        extra.append(f"dtype={dtype}")
    if device is not None:
        extra.append(f"device={device}")
    return f"{kind} ({', '.join(extra)})" if extra else kind


# ---------------------------------------------------------------------------- spec -> compiler inputs

@dataclass
class Specialization:
    """A launch's arguments as the compiler sees them (all dicts in parameter order)."""

    signature: dict[str, str]
    constexprs: dict[str, Any]
    attrs: dict[str, ArgAttrs]
    device: int  # CPU_DEVICE, a CUDA ordinal, or NEUTRAL_DEVICE when no argument says


def describe_specs(names: Sequence[str], is_constexpr: Sequence[bool], specs: Sequence[tuple],
                   values: Sequence[Any], kernel: str,
                   aligned: Optional[Sequence[bool]] = None) -> Specialization:
    """Turn specs into signature/constexprs/attrs and decide the device (all array
    arguments must live on one device). `aligned[i]`: parameter i's ints were
    specialized on their divisibility (not `do_not_specialize[_on_alignment]`), so
    their attrs say it is exact (`ArgAttrs.exact_divisibility`)."""
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[str, ArgAttrs] = {}
    devices: dict[int, str] = {}
    aligned = list(aligned) if aligned is not None else [False] * len(names)
    for name, cx, spec, value, exact in zip(names, is_constexpr, specs, values, aligned):
        if is_tree_spec(spec):  # a tuple or descriptor: one entry per leaf (see arg_trees)
            signature[name] = signature_of(spec)
            leaves = zip(leaf_specs(name, spec), leaf_values(value))
        else:
            signature[name] = spec[0]
            leaves = [((name, spec), value)]
        for (leaf, spec), value in leaves:
            kind = spec[0]
            if kind == "constexpr":
                constexprs[leaf] = _constexpr_value(cx, spec, value)
                continue
            attrs[leaf] = ArgAttrs(divisibility=spec[1], exact_divisibility=exact and kind in _INT_KINDS)
            if kind[0] == "*" and spec[2] != NEUTRAL_DEVICE:
                devices.setdefault(spec[2], leaf)
    if len(devices) > 1:
        where = ", ".join(f"'{n}' on {device_label(d)}" for d, n in devices.items())
        raise KernelArgumentError(
            f"kernel '{kernel}' got arrays on different devices ({where}); all array arguments "
            "of a launch must live on one device")
    device = next(iter(devices)) if devices else NEUTRAL_DEVICE
    return Specialization(signature, constexprs, attrs, device)


def _constexpr_value(is_constexpr_param: bool, spec: tuple, value: Any) -> Any:
    if getattr(value, "_tegula_constexpr", False) or type(value).__name__ == "constexpr":
        value = getattr(value, "value", value)
    if not is_constexpr_param and spec[1] == 1 and spec[2] is int:
        return 1  # an int specialized because it equals 1 (a numpy int 1 too)
    return value


def device_label(device: int) -> str:
    if device == CPU_DEVICE:
        return "cpu"
    if device == NEUTRAL_DEVICE:
        return "any device"
    return f"cuda:{device}"
