"""`CompileOptions`: the launch/compile options a kernel is compiled with.

One frozen (hashable) dataclass shared by every backend. Its field names are the
keyword arguments a launch accepts besides the kernel's parameters
(`kernel[grid](..., num_warps=8, num_stages=2)`), which are also the keys of a Triton
`compile(..., options={...})` dict and of an autotuning `Config`. Defaults are
Triton 3.6's.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Optional, Sequence

from ..config import knobs
from ..errors import KernelArgumentError, LaunchOptionAssertion, LaunchOptionValueError


def _default_fp_fusion() -> bool:
    """`TRITON_DEFAULT_FP_FUSION` (`knobs.language.default_fp_fusion`), read when the
    options are made, i.e. at the launch that compiles (Triton reads it then too)."""
    return bool(knobs.default_fp_fusion)


def _default_arch() -> Optional[str]:
    """`TRITON_OVERRIDE_ARCH` (`knobs.runtime.override_arch`), or None: the device's."""
    return knobs.override_arch or None


@dataclass(frozen=True)
class CompileOptions:
    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1
    maxnreg: Optional[int] = None
    # Triton's meaning: device_assert (and tl.assume checks) compiled in
    debug: bool = False
    # tegula's checked mode: compiled backends bounds-check every load and store and
    # report the first failure after the launch (costs a sync per launch)
    checked: bool = False
    # default: the TRITON_DEFAULT_FP_FUSION knob (on unless set to 0)
    enable_fp_fusion: bool = field(default_factory=_default_fp_fusion)
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    default_dot_input_precision: str = "tf32"
    allowed_dot_input_precisions: tuple[str, ...] = ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6")
    max_num_imprecise_acc_default: int = 0
    sanitize_overflow: bool = True
    extern_libs: Optional[tuple[tuple[str, str], ...]] = None
    # A stage file (`k.tir_opt`, `k.ptx`, ...) that replaces that stage's output, as an
    # autotuning Config's `ir_override` (Triton 3.6); the extension names the stage.
    ir_override: Optional[str] = None
    # The CUDA architecture the kernel is lowered for ("sm80": mma.sync, cp.async, no
    # wgmma) instead of the device's, as Triton's `arch` option; the PTX and cubin are
    # still the device's. Default: the TRITON_OVERRIDE_ARCH knob, else the device's.
    # Host backends ignore it.
    arch: Optional[str] = field(default_factory=_default_arch)

    # whether `arch` is a request to check and normalize (a subclass may carry a fact)
    _arch_is_request = True

    def __post_init__(self) -> None:
        if self.arch is not None and self._arch_is_request:
            object.__setattr__(self, "arch", normalize_arch(self.arch))
        w = self.num_warps
        if not isinstance(w, int) or w <= 0 or w & (w - 1):
            # an AssertionError too: Triton checks it with an assert
            raise LaunchOptionAssertion(f"num_warps must be a power of 2, got {w!r}")
        if not isinstance(self.num_stages, int) or self.num_stages < 0:
            raise KernelArgumentError(f"num_stages must be a non-negative int, got {self.num_stages!r}")
        if not isinstance(self.num_ctas, int) or self.num_ctas < 1:
            raise KernelArgumentError(f"num_ctas must be a positive int, got {self.num_ctas!r}")
        if self.maxnreg is not None and (not isinstance(self.maxnreg, int) or self.maxnreg <= 0):
            raise KernelArgumentError(f"maxnreg must be a positive int or None, got {self.maxnreg!r}")
        if self.default_dot_input_precision not in self.allowed_dot_input_precisions:
            raise KernelArgumentError(
                f"default_dot_input_precision must be one of {self.allowed_dot_input_precisions}, "
                f"got {self.default_dot_input_precision!r}")

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return _FIELD_NAMES

    @classmethod
    def from_dict(cls, values: Optional[Mapping[str, Any]], *, strict: bool,
                  what: str = "compile options", params: Sequence[str] = ()) -> "CompileOptions":
        """Options from a dict. `strict`: unknown keys are an error (a launch's keyword
        arguments); otherwise they are ignored, as Triton's `compile(options=...)` does.
        `None` values mean "the default" (an autotuning Config leaves maxnreg unset so)."""
        if not values:
            return cls()  # the knob-given defaults as they are now
        known: dict[str, Any] = {}
        unknown = []
        for k, v in values.items():
            if k in OTHER_TARGET_OPTIONS:
                continue  # Triton's AMD backend reads these; its NVIDIA backend ignores them
            if k in _FIELD_NAMES:
                if v is not None or k == "maxnreg":
                    known[k] = _normalize(k, v)
            else:
                unknown.append(k)
        if unknown and strict:
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(k, [*params, *_FIELD_NAMES], n=1)
                if close:
                    hints.append(f"'{k}' (did you mean '{close[0]}'?)")
                else:
                    hints.append(f"'{k}'")
            listed = f"parameters are {', '.join(params)}; " if params else ""
            raise KernelArgumentError(
                f"unknown keyword argument{'s' if len(unknown) > 1 else ''} {', '.join(hints)} in {what}; "
                f"its {listed}launch options are {', '.join(sorted(_FIELD_NAMES))}")
        return cls(**known)

    def replace(self, **changes: Any) -> "CompileOptions":
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _normalize(name: str, value: Any) -> Any:
    # Keep the dataclass hashable: Triton passes extern_libs as a dict and the dot
    # precisions as a list.
    if name == "extern_libs" and isinstance(value, Mapping):
        return tuple(sorted((str(k), str(v)) for k, v in value.items()))
    if name == "allowed_dot_input_precisions" and isinstance(value, (list, tuple)):
        return tuple(value)
    if name in ("debug", "checked"):
        return bool(value)
    if name in ("num_warps", "num_stages", "num_ctas") and hasattr(value, "__index__"):
        return value.__index__()
    return value


_ARCH = re.compile(r"(?:sm_?)?(\d+)a?")


def normalize_arch(arch: Any) -> str:
    """`arch` as Triton spells it, `sm<capability>`: from "sm80" (Triton's form), "sm_90a",
    "90" or 90. Which capabilities compile is the CUDA backend's question."""
    m = _ARCH.fullmatch(str(arch).strip().lower()) if isinstance(arch, (str, int)) and not isinstance(arch, bool) \
        else None
    if m is None:
        raise LaunchOptionValueError(f"arch must have the form sm<capability> (sm80, sm90, ...), got {arch!r}")
    return f"sm{int(m.group(1))}"


_FIELD_NAMES = frozenset(f.name for f in fields(CompileOptions))
# Launch options only Triton's AMD backend knows (autotuning configs written for both
# vendors carry them): accepted and ignored, as Triton on NVIDIA GPUs does.
OTHER_TARGET_OPTIONS = frozenset({"matrix_instr_nonkdim", "waves_per_eu", "kpack", "schedule_hint",
                                  "instruction_sched_variant"})
