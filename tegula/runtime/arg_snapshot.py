"""Copies of kernel arguments taken before autotuning and written back after it.

Benchmarking a config runs the kernel many times; a kernel that updates an argument in
place (`x += y`, a histogram, an atomic accumulator) would leave the caller's data
changed by every one of those runs. The autotuner snapshots the arguments the compiler
reports as written (`metadata.written_args`), plus the user's `restore_value` names, and
restores them, so tuning never corrupts data. Works for numpy arrays, torch tensors
(CPU or CUDA), CuPy arrays, and anything with `copy()` and item assignment.

Only the user's `restore_value` arguments are written back as Triton does it (torch's
`copy_`, which counts as an in-place change for autograd). The arguments tegula saves of
its own accord are written back without a trace: Triton never touches them, and when the
written set is unknown (configs with a `pre_hook` compile only when first timed) they
include read-only inputs that autograd saved for backward, which a version bump would
make fail with "modified by an inplace operation".
"""
from __future__ import annotations

import sys
from typing import Any, Iterable, Optional


def is_array_like(value: Any) -> bool:
    """Whether `value` is a buffer a kernel could write through (not a scalar or None)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return False
    # `data_ptr` first: a torch tensor that requires grad raises (not AttributeError) when
    # asked for its __cuda_array_interface__
    return (hasattr(value, "data_ptr") or hasattr(value, "__array_interface__")
            or hasattr(type(value), "__cuda_array_interface__") or hasattr(value, "__dlpack__"))


def _copy(value: Any) -> Any:
    if hasattr(value, "clone") and hasattr(value, "copy_"):  # torch
        return value.detach().clone()
    if hasattr(value, "copy"):  # numpy, CuPy
        return value.copy()
    raise TypeError(f"cannot snapshot an argument of type {type(value).__name__}")


def _write_back(dst: Any, src: Any, tracked: bool = True) -> None:
    if hasattr(dst, "copy_"):
        torch = sys.modules.get("torch")
        if not tracked and torch is not None and isinstance(dst, torch.Tensor):
            # `.data` shares the storage but not the version counter autograd checks
            dst.data.copy_(src)
        else:
            dst.copy_(src)
        return
    try:
        import numpy as np

        if isinstance(dst, np.ndarray):
            np.copyto(dst, src)
            return
    except ImportError:
        pass
    dst[...] = src


def zero_(value: Any) -> None:
    """Set every element of a buffer to zero, in place (for `reset_to_zero`)."""
    if value is None:
        return
    if hasattr(value, "zero_"):
        value.zero_()
    elif hasattr(value, "fill"):
        value.fill(0)
    else:
        value[...] = 0


class ArgSnapshot:
    """Saved copies of some named arguments; `restore()` writes them back in place."""

    def __init__(self) -> None:
        self._saved: dict[str, tuple[Any, Any, bool]] = {}
        self.skipped: list[str] = []  # written arguments we could not copy (reported)

    @classmethod
    def take(cls, named_args: dict[str, Any], names: Iterable[str],
             tracked: Iterable[str] = ()) -> "ArgSnapshot":
        """Copies of the `names` arguments; those also in `tracked` (the user's
        `restore_value`) are written back as a visible in-place copy, the others without
        a trace (module docstring)."""
        snap = cls()
        tracked = set(tracked)
        for name in dict.fromkeys(names):  # ordered, without duplicates
            value = named_args.get(name)
            if not is_array_like(value):
                continue
            try:
                snap._saved[name] = (value, _copy(value), name in tracked)
            except TypeError:
                snap.skipped.append(name)
        return snap

    @property
    def names(self) -> list[str]:
        return list(self._saved)

    def restore(self, names: Optional[Iterable[str]] = None) -> None:
        for name in (self._saved if names is None else names):
            entry = self._saved.get(name)
            if entry is not None:
                dst, saved, tracked = entry
                _write_back(dst, saved, tracked)

    def __contains__(self, name: str) -> bool:
        return name in self._saved

    def __len__(self) -> int:
        return len(self._saved)
