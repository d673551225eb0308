"""`extern_elementwise`: a library function applied element by element, dispatched on
its arguments' dtypes (Triton 3.6's rules, which libdevice and user `@core.extern`
wrappers rely on).

The arguments become tensors and are broadcast to one shape. When their dtypes are one
of the overloads as given, nothing is converted; otherwise they are first promoted to a
common type as a binary arithmetic operator would (so `pow(x_fp32, y_fp64)` calls the
fp64 overload), and the promoted dtypes must then name an overload. The result has the
overload's dtype.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .. import ir
from ..ir import attrs as A
from .constexpr import unwrap_constexpr
from .dtypes import block_type, str_to_ty
from .tensor import tensor


def _dtype_name(t: Any) -> str:
    return t if isinstance(t, str) else t.name


def _normalize(table: Mapping[Any, Any]) -> dict[tuple[str, ...], tuple[str, Any]]:
    out = {}
    for key, (symbol, ret) in table.items():
        key = key if isinstance(key, tuple) else (key,)
        out[tuple(_dtype_name(k) for k in key)] = (symbol, ret)
    return out


class ExternMixin:
    def extern_elementwise(self, lib_name: str, lib_path: str, args: Sequence[Any],
                           arg_type_symbol_dict: Mapping[Any, Any], is_pure: bool) -> tensor:
        table = _normalize(arg_type_symbol_dict)
        xs = [self.to_tensor(unwrap_constexpr(a)) for a in args]
        if not xs:
            raise TypeError("extern_elementwise needs at least one argument")
        given = tuple(x.dtype.name for x in xs)
        arithmetic_check = given not in table
        anchor = xs[0]
        for x in xs:
            _, anchor = self.binary_op_type_checking(x, anchor, "extern_elementwise",
                                                     arithmetic_check=arithmetic_check)
        xs = [self.binary_op_type_checking(x, anchor, "extern_elementwise", arithmetic_check=arithmetic_check)[0]
              for x in xs]
        types = tuple(x.dtype.name for x in xs)
        if types not in table:
            raise ValueError(f"input arg type does not match. Expect one of {list(table)}, got {types}")
        symbol, ret = table[types]
        ret_ty = str_to_ty(_dtype_name(ret)) if isinstance(ret, str) else ret
        shape = xs[0].shape
        out_type = ret_ty if not shape else block_type(ret_ty, list(shape))
        return self.emit_tensor(ir.Op.EXTERN_ELEMENTWISE, *xs, attrs=A.ExternAttrs(symbol, bool(is_pure)),
                                type=out_type)
