"""The cubin a compiled CUDA kernel leaves where Triton's cache would hold it, so that
PyTorch Inductor launches tegula's kernels through its static CUDA launcher, as it
launches Triton's.

Inductor (torch 2.6 and newer, `use_static_triton_launcher`, on by default) does not
call a Triton kernel's `run` on every launch: it looks for the kernel's cubin at
`$TRITON_CACHE_DIR/<base32 of kernel.hash>/<function name>.cubin` (Triton's
`FileCacheManager` layout), loads it itself and calls `cuLaunchKernel` from C++ with the
signature's non-constexpr arguments in order (plus Triton's scratch pointers when the
metadata has `global_scratch_size` / `profile_scratch_size`). Where the file is missing
it falls back to `CompiledKernel.run`, which for a graph of many small kernels costs
several microseconds of Python a launch more (a transformer block's step under
`torch.compile` on an H200, cProfile over 50 steps: Triton's 1200 launches 12 ms,
tegula's through `run` 37 ms).

tegula writes that file for the kernels whose parameters are exactly what the static
launcher passes: every non-constexpr signature argument, in order, each a pointer, an
integer or a 32/64-bit float scalar, and nothing hidden after them (checked mode's
error buffer and extents, and the tensor maps of TMA descriptors, are filled by tegula's
own launcher: such kernels get no file and keep `run`). 16-bit and 8-bit float scalars
are left out too (the static launcher passes every float scalar as 32 bits).
"""
from __future__ import annotations

import os
from typing import Any

from ..config import knobs
from .cache_manager import _base32

# the scalar parameter types (tegula IR names) the static launcher packs as the kernel
# reads them: pointers as 64-bit addresses, these as their own width (bool as int32)
_SCALARS = frozenset({"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64"})


def statically_launchable(kernel: Any) -> bool:
    """Whether `kernel` (a CompiledKernel) takes exactly the parameters Inductor's static
    launcher passes, and has a cubin whose entry is named as its function."""
    md, src = kernel.metadata, kernel.src
    fn = getattr(src, "fn", None)
    arg_types = getattr(md, "arg_types", None)
    if (not isinstance(kernel.asm.get("cubin"), bytes) or fn is None or getattr(src, "arg_trees", None)
            or arg_types is None or src.name != getattr(fn, "__name__", None)):
        return False
    if getattr(md, "checked", False) or getattr(md, "tensormaps", None) or getattr(md, "num_ctas", 1) != 1:
        return False
    if len(arg_types) != len(md.arg_indices):
        return False
    return all(t.startswith("ptr") or t in _SCALARS for t in arg_types)


def leave_cubin(kernel: Any) -> None:
    """Write `kernel`'s cubin where Triton's cache would hold it (see the module
    docstring), if it qualifies and the file is not there yet. The folder is
    `TRITON_CACHE_DIR` (Inductor sets it before compiling), else the cache directory."""
    if not statically_launchable(kernel):
        return
    try:
        key = _base32(kernel.hash)
    except ValueError:  # not a hex digest: no Triton path for it
        return
    root = os.environ.get("TRITON_CACHE_DIR") or knobs.cache_dir
    folder = os.path.join(root, key)
    path = os.path.join(folder, f"{kernel.name}.cubin")
    if os.path.exists(path):
        return
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(kernel.asm["cubin"])
        os.replace(tmp, path)
    except OSError:  # a read-only cache: Inductor falls back to `run`
        return
