"""`tegula.Config`: one autotuning candidate (meta-parameters and launch options).

Triton 3.6's class, field for field: `Config(**config.__dict__)` rebuilds a config,
`all_kwargs()` is what a launch receives, `str()` is the form printed and used in
cache keys, and equality/hash cover the values and the pre_hook.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

_LAUNCH_OPTIONS = ("num_warps", "num_ctas", "num_stages", "maxnreg", "ir_override")


class Config:
    """One candidate: meta-parameters (`kwargs`) and launch options for the autotuner."""

    def __init__(self, kwargs: dict[str, Any], num_warps: Optional[int] = 4, num_stages: Optional[int] = 3,
                 num_ctas: Optional[int] = 1, maxnreg: Optional[int] = None,
                 pre_hook: Optional[Callable[[dict[str, Any]], Any]] = None,
                 ir_override: Optional[str] = None) -> None:
        self.kwargs = kwargs
        self.num_warps = num_warps
        self.num_ctas = num_ctas
        self.num_stages = num_stages
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook
        self.ir_override = ir_override

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.kwargs = state.get("kwargs", {})
        self.num_warps = state.get("num_warps", 4)
        self.num_stages = state.get("num_stages", 3)
        self.num_ctas = state.get("num_ctas", 1)
        self.maxnreg = state.get("maxnreg", None)
        self.pre_hook = state.get("pre_hook", None)
        self.ir_override = state.get("ir_override", None)

    def all_kwargs(self) -> dict[str, Any]:
        """The meta-parameters and every launch option that is set (not None)."""
        options = {k: getattr(self, k) for k in _LAUNCH_OPTIONS if getattr(self, k) is not None}
        return {**self.kwargs, **options}

    def __str__(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_ctas: {self.num_ctas}",
                  f"num_stages: {self.num_stages}", f"maxnreg: {self.maxnreg}"]
        if self.ir_override is not None:
            parts.append(f"ir_override: {self.ir_override}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"Config({self.kwargs!r}, num_warps={self.num_warps}, num_stages={self.num_stages}, " \
               f"num_ctas={self.num_ctas}, maxnreg={self.maxnreg})"

    def __hash__(self) -> int:
        return hash((*self.all_kwargs().items(), self.pre_hook))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        mine = (tuple(self.all_kwargs().items()), self.pre_hook)
        return mine == (tuple(other.all_kwargs().items()), other.pre_hook)
