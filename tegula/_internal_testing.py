"""`triton._internal_testing`: the helpers Triton's own unit tests import, on tegula.

Triton ships this module for its test suite (`python/test/unit/`); a Triton test file
run through `python -m tegula.compat -m pytest` imports it as
`triton._internal_testing`. It provides the dtype name lists the tests parametrize over
(their order matters: test ids are built from them), the target predicates their skip
markers call (`is_cuda`, `is_hopper`, `is_interpreter`, ...), the data helpers
(`numpy_random`, `to_triton`, `to_numpy`, `str_to_triton_dtype`, `torch_dtype_name`),
the scratch allocator their `with_allocator` fixture installs, and the knob isolation
behind their `fresh_knobs` fixtures.

Needs numpy, torch and pytest (as Triton's does); `import tegula` never imports it.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pytest
import torch
from numpy.random import RandomState

from . import language as tl
from .config import knobs
from .runtime.args import TensorWrapper, reinterpret

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})


# ---------------------------------------------------------------------------- the target

def is_interpreter() -> bool:
    """TRITON_INTERPRET=1 (or TEGULA_INTERPRET=1): kernels run on the interpreter."""
    return bool(knobs.interpret)


def get_current_target() -> Any:
    """The active GPU target; None under the interpreter or without a GPU driver."""
    if is_interpreter():
        return None
    from .runtime import driver

    try:
        target = driver.active.get_current_target()
    except Exception:  # no GPU driver here
        return None
    return target if getattr(target, "backend", None) in ("cuda", "hip") else None


def _backend() -> Optional[str]:
    return getattr(get_current_target(), "backend", None)


def get_arch() -> str:
    return str(getattr(get_current_target(), "arch", "") or "")


def _major() -> int:
    arch = get_arch()
    return int(arch) // 10 if arch.isdigit() else -1


def is_cuda() -> bool:
    return _backend() == "cuda"


def is_hip() -> bool:
    return _backend() == "hip"


def is_xpu() -> bool:
    return _backend() == "xpu"


def is_ampere_or_newer() -> bool:
    return is_cuda() and _major() >= 8


def is_hopper_or_newer() -> bool:
    return is_cuda() and _major() >= 9


def is_hopper() -> bool:
    return is_cuda() and _major() == 9


def is_blackwell() -> bool:
    return is_cuda() and _major() == 10


def is_sm12x() -> bool:
    return is_cuda() and _major() == 12


# tegula has no AMD backend: every HIP predicate is False, as on an NVIDIA machine.
def is_hip_cdna2() -> bool:
    return is_hip() and get_arch() == "gfx90a"


def is_hip_cdna3() -> bool:
    return is_hip() and get_arch() == "gfx942"


def is_hip_cdna4() -> bool:
    return is_hip() and get_arch() == "gfx950"


def is_hip_cdna() -> bool:
    return is_hip_cdna2() or is_hip_cdna3() or is_hip_cdna4()


def is_hip_gfx11() -> bool:
    return is_hip() and "gfx11" in get_arch()


def is_hip_gfx12() -> bool:
    return is_hip() and "gfx12" in get_arch()


def is_hip_gfx1250() -> bool:
    return is_hip() and "gfx1250" in get_arch()


def get_hip_lds_size() -> int:
    return 160 * 1024 if is_hip_cdna4() else 64 * 1024


def supports_tma(byval_only: bool = False) -> bool:
    """Tensor descriptors work: under the interpreter always, on the GPU from Hopper."""
    return is_interpreter() or (is_cuda() and _major() >= 9)


def supports_ws() -> bool:
    return is_interpreter() or (is_cuda() and _major() >= 9)


def tma_skip_msg(byval_only: bool = False) -> str:
    return "Requires TMA support (NVIDIA Hopper or newer)"


requires_tma = pytest.mark.skipif(not supports_tma(), reason=tma_skip_msg())


# ---------------------------------------------------------------------------- data

def numpy_random(shape: Any, dtype_str: str, rs: Optional[RandomState] = None, low: Any = None,
                 high: Any = None) -> np.ndarray:
    """Test data as a numpy array: seeded with 17 unless `rs` is given; integers uniform in
    [low, high) within the type's range and never 0 (division tests); float8 names give
    int8 bit patterns in [20, 40); floats standard normal; 'bfloat16' a float32 array
    exactly representable in bf16; 'bool' a random mask."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    rs = RandomState(seed=17) if rs is None else rs
    if dtype_str in integral_dtypes:
        info = np.iinfo(getattr(np, dtype_str))
        lo = info.min if low is None else max(low, info.min)
        hi = info.max if high is None else min(high, info.max)
        out = rs.randint(lo, hi, shape, dtype=getattr(np, dtype_str))
        out[out == 0] = 1
        return out
    if "float8" in dtype_str:
        return rs.randint(20, 40, shape, dtype=np.int8)
    if dtype_str in float_dtypes:
        return rs.normal(0, 1, shape).astype(dtype_str)
    if dtype_str == "bfloat16":
        bits = rs.normal(0, 1, shape).astype("float32").view("uint32")
        return (bits & np.uint32(0xFFFF0000)).view("float32")
    if dtype_str in ("bool", "int1", "bool_"):
        return rs.normal(0, 1, shape) > 0.0
    raise RuntimeError(f"numpy_random: unknown dtype {dtype_str}")


def to_triton(x: np.ndarray, device: Any, dst_type: Optional[str] = None) -> Any:
    """A numpy array as a kernel argument on `device`: unsigned ints travel as the signed
    torch type of their width seen as the unsigned tl dtype; float8 destinations see the
    int8 bits as that float8; float32 bound for bfloat16 is rounded by torch."""
    name = x.dtype.name
    if name in uint_dtypes:
        signed = x.astype(getattr(np, name[1:]))
        return reinterpret(torch.tensor(signed, device=device), getattr(tl, name))
    if dst_type and "float8" in dst_type:
        return reinterpret(torch.tensor(x, device=device), getattr(tl, dst_type))
    if name == "float32" and dst_type == "bfloat16":
        return torch.tensor(x, device=device).bfloat16()
    return torch.tensor(x, device=device)


_TL_NAMES = {"bool": "int1", "float8_e4m3fn": "float8e4nv", "float8_e5m2": "float8e5",
             "float8_e4m3fnuz": "float8e4b8", "float8_e5m2fnuz": "float8e5b16"}


def str_to_triton_dtype(x: str) -> Any:
    """'float32' -> tl.float32, 'bool' -> tl.int1, 'float8_e5m2' -> tl.float8e5, ..."""
    return getattr(tl, _TL_NAMES.get(x, x))


def torch_dtype_name(dtype: Any) -> str:
    """The bare name of a tl or torch dtype ('int64' for torch.int64)."""
    if isinstance(dtype, tl.dtype):
        return dtype.name
    if isinstance(dtype, torch.dtype):
        return str(dtype).split(".")[-1]
    raise TypeError(f"not a triton or torch dtype: {type(dtype)}")


def to_numpy(x: Any) -> np.ndarray:
    """A kernel argument back as numpy (a reinterpreted tensor in its tl dtype; bf16 as f32)."""
    if isinstance(x, TensorWrapper):
        return x.base.cpu().numpy().astype(getattr(np, torch_dtype_name(x.dtype)))
    if isinstance(x, torch.Tensor):
        return x.cpu().float().numpy() if x.dtype is torch.bfloat16 else x.cpu().numpy()
    raise ValueError(f"not a triton-compatible tensor: {x!r}")


def unwrap_tensor(t: Any) -> Any:
    return t.base if isinstance(t, TensorWrapper) else t


def default_alloc_fn(size: int, align: int, stream: Any) -> Any:
    """Scratch memory for `set_allocator` (the tests' `with_allocator` fixture)."""
    return torch.empty(size, dtype=torch.int8, device="cuda" if is_cuda() else "cpu")


# ---------------------------------------------------------------------------- knobs

def _fresh_knobs_impl(skipped_attr: Optional[set[str]] = None) -> tuple[Callable[[], Any], Callable[[], None]]:
    """(fresh, reset) for the tests' `fresh_knobs` fixtures: `fresh()` returns the knobs
    as they are with nothing set, `reset()` restores the state before.

    With Triton-style knob groups (`knobs.base_knobs` subclasses, each with `copy()`,
    `reset()` and `knob_descriptors`), each group not in `skipped_attr` is swapped for a
    reset copy. tegula's own knobs (`config.knobs`) keep no state but the environment,
    so for them the environment is what is isolated: every TEGULA_*/TRITON_* variable
    except the run's interpret mode and cache directory is hidden until `reset()`."""
    import tegula

    from . import config

    patcher = pytest.MonkeyPatch()
    skipped = set(skipped_attr or ())
    group_knobs = getattr(tegula, "knobs", None)
    base = getattr(group_knobs, "base_knobs", None)
    groups = {} if base is None else {
        name: g for name, g in vars(group_knobs).items()
        if isinstance(g, base) and g is not base and name not in skipped}
    keep = {"TEGULA_INTERPRET", "TRITON_INTERPRET", "TEGULA_CACHE_DIR", "TRITON_CACHE_DIR"}

    def fresh() -> Any:
        for name, group in groups.items():
            patcher.setattr(group_knobs, name, group.copy().reset())
            for desc in getattr(group, "knob_descriptors", {}).values():
                patcher.delenv(desc.key, raising=False)
        for knob in config.KNOBS.values():
            for var in (knob.name, knob.alias):
                if var and var not in keep:
                    patcher.delenv(var, raising=False)
        return group_knobs if group_knobs is not None else knobs

    return fresh, patcher.undo
