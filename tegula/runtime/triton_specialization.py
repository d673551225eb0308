"""Triton's argument-specialization helpers (`triton.runtime.jit.create_specialize_impl`,
`mangle_type`), over tegula's own (`specialization.spec_value`).

`create_specialize_impl(specialize_extra)` returns `specialize_impl(arg, is_const=False,
specialize_value=True, align=True) -> (type, key)`: the signature type of `arg`
(`*fp16`, `*kfp16` when `is_const`, `i32`, `fp32`, `i1`, or `constexpr` for None, ints equal to 1 and constexpr
values) and its specialization key: for tensors and ints the string
`specialize_extra(arg, "tensor" | "int", align=...)` returns (`"D"` for divisible by
16, as `BaseBackend.get_arg_specialization` says), for constexprs their value. Tuples
give tuples of both. PyTorch uses these to specialize user kernels it traces.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from . import specialization as S


def _default_extra(arg: Any, ty: str, **kwargs: Any) -> str:
    from ..compat_surface.backends.compiler import BaseBackend

    return BaseBackend.get_arg_specialization(arg, ty, **kwargs)


def create_specialize_impl(specialize_extra: Optional[Callable[..., Any]] = None) -> Callable[..., tuple]:
    extra = specialize_extra or _default_extra

    def specialize_impl(arg: Any, is_const: bool = False, specialize_value: bool = True,
                        align: bool = True) -> tuple:
        if isinstance(arg, tuple) and not hasattr(arg, "data_ptr"):
            specs = [specialize_impl(a, is_const, specialize_value, align) for a in arg]
            return tuple(t for t, _ in specs), tuple(k for _, k in specs)
        if getattr(arg, "_tegula_jit", False):
            return "constexpr", arg.cache_key
        if type(arg).__name__ == "constexpr":
            return "constexpr", getattr(arg, "value", arg)
        spec = S.spec_value(arg, specialize_value, align)
        ty = spec[0]
        if ty == "constexpr":
            return ty, spec[1]
        if ty.startswith("*"):
            ty = "*k" + ty[1:] if is_const else ty  # a pointer to read-only memory
            return ty, (extra(arg, "tensor", align=align) or "") if specialize_value else ""
        if ty in ("i32", "i64", "u64"):
            return ty, (extra(arg, "int", align=align) or "") if specialize_value else ""
        return ty, None

    return specialize_impl


_SPECIALIZE = create_specialize_impl()


def specialize_impl(arg: Any, is_const: bool = False, specialize_value: bool = True, align: bool = True,
                    specialize_extra: Optional[Callable[..., Any]] = None) -> tuple:
    """One argument's `(type, key)` (see the module docstring)."""
    impl = _SPECIALIZE if specialize_extra is None else create_specialize_impl(specialize_extra)
    return impl(arg, is_const, specialize_value, align)


def mangle_type(arg: Any, specialize: bool = False) -> str:
    """The signature type of `arg` (`*fp32`, `i32`, `fp32`, `constexpr`, ...)."""
    return _SPECIALIZE(arg, False, specialize, True)[0]


__all__ = ["create_specialize_impl", "mangle_type", "specialize_impl"]
