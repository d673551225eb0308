"""`tl.dot`: matrix product of 2-D tiles, or batched over a leading axis of 3-D tiles.

Triton 3.6 rules (NVIDIA target): both operands have the same dtype (any two fp8 types
may mix); int8 x int8 accumulates in int32; fp32 and bf16 accumulate in fp32; fp64 in
fp64; fp16 and fp8 in `out_dtype` (fp32 or fp16; bf16 is refused). M, N and K may be
any power of two, as in Triton's interpreter: where Triton's NVIDIA backend refuses
K < 16, tegula computes the small dot on FMAs (a tensor-core instruction needs K >= 16).
f32 operands use the `input_precision` ("tf32" by default, or "tf32x3", "ieee", "bf16x3",
"bf16x6"). "bf16x3" and "bf16x6" are rewritten here, for every backend, into dots of
bf16 pieces of the f32 operands, as Triton's F32DotTC pass does (below).
"""
from __future__ import annotations

from typing import Any, Optional

from .. import ir
from ..config import knobs
from ..ir import attrs as A
from . import dtypes as T
from .constexpr import unwrap_constexpr
from .dtypes import block_type
from .semantic_base import SemanticBase, fmt_shape
from .tensor import tensor

INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6")
# How many bf16 pieces each f32 operand is split into, per bf16 input precision.
_BF16_PIECES = {"bf16x3": 2, "bf16x6": 3}
_DOT_DTYPES = ("int8", "uint8", "fp16", "bf16", "fp32", "fp64")


class DotMixin(SemanticBase):
    def default_input_precision(self, allow_tf32: Optional[bool]) -> str:
        # TRITON_F32_DEFAULT wins over allow_tf32, as in Triton 3.6 (part of the cache keys)
        if knobs.f32_default:
            return knobs.f32_default
        default = getattr(self.options, "default_dot_input_precision", None) or "tf32"
        if allow_tf32 is None:
            return default
        return "tf32" if allow_tf32 else "ieee"

    def dot(self, lhs: tensor, rhs: tensor, acc: Optional[tensor] = None,
            input_precision: Optional[str] = None, allow_tf32: Optional[bool] = None,
            max_num_imprecise_acc: Optional[int] = None, out_dtype: Any = T.float32) -> tensor:
        if input_precision is not None and allow_tf32 is not None:
            raise ValueError("Only one of input_precision and allow_tf32 can be specified")
        precision = input_precision
        if precision is None:
            precision = self.default_input_precision(allow_tf32)
        precision = str(unwrap_constexpr(precision)).lower()
        if precision not in INPUT_PRECISIONS:
            raise ValueError(f"input_precision must be one of {INPUT_PRECISIONS}. Got {precision}")
        out_dtype = T.as_dtype(out_dtype, "out_dtype")
        lhs, rhs = self.to_tensor(lhs), self.to_tensor(rhs)
        a_shape, b_shape = list(self.shape_of(lhs)), list(self.shape_of(rhs))
        shapes = f"{fmt_shape(a_shape)} and {fmt_shape(b_shape)}"
        if len(a_shape) != len(b_shape) or len(a_shape) < 2:
            raise ValueError(f"tl.dot needs operands of equal rank >= 2, got shapes {shapes}")
        if a_shape[:-2] != b_shape[:-2]:
            raise ValueError(f"tl.dot operands must have equal batch shapes, got {shapes}")
        if a_shape[-1] != b_shape[-2]:
            raise ValueError(f"tl.dot: incompatible shapes {shapes} (the first operand's last dimension "
                             f"{a_shape[-1]} must equal the second operand's dimension -2, {b_shape[-2]})")
        c_shape = a_shape[:-1] + [b_shape[-1]]
        if acc is not None:
            acc = self.to_tensor(acc)
            if list(self.shape_of(acc)) != c_shape:
                raise ValueError(f"tl.dot accumulator shape {fmt_shape(self.shape_of(acc))} is incompatible "
                                 f"with the product's shape {fmt_shape(c_shape)}")
        rank = len(c_shape)
        if rank >= 4:
            # Fold all batch axes into one: the IR's dot is 2-D or batched 3-D.
            batch = 1
            for d in c_shape[:-2]:
                batch *= d
            lhs = self.reshape(lhs, [batch] + a_shape[-2:])
            rhs = self.reshape(rhs, [batch] + b_shape[-2:])
            if acc is not None:
                acc = self.reshape(acc, [batch] + c_shape[-2:])
        res = self._dot_3d(lhs, rhs, acc, precision, unwrap_constexpr(max_num_imprecise_acc), out_dtype)
        if rank >= 4:
            res = self.reshape(res, c_shape)
        return res

    def _dot_3d(self, lhs: tensor, rhs: tensor, acc: Optional[tensor], precision: str,
                max_num_imprecise_acc: Optional[int], out_dtype) -> tensor:
        a, b = lhs.dtype, rhs.dtype
        if not (a.is_fp8() and b.is_fp8()):
            for name, t in (("lhs", a), ("rhs", b)):
                if t.name not in _DOT_DTYPES:
                    raise TypeError(f"Unsupported {name} dtype {t} for tl.dot")
            if a != b:
                raise TypeError(f"Both operands of tl.dot must have the same dtype. Got {a} and {b}")
        if a.is_int():
            if a != T.int8:
                raise TypeError(f"tl.dot supports int8 integer operands only, got {a}")
            ret = T.int32
        elif out_dtype.is_bf16():
            raise ValueError("out_dtype=bfloat16 is unsupported. Please use out_dtype=float32/float16 and "
                             "cast with `.to(tl.bfloat16)`")
        elif a.is_fp32() or a.is_bf16():
            ret = T.float32
        elif a.is_fp64():
            ret = T.float64
        else:
            if out_dtype not in (T.float32, T.float16):
                raise ValueError(f"tl.dot out_dtype must be tl.float32 or tl.float16, got {out_dtype}")
            ret = out_dtype
        ret_shape = list(self.shape_of(lhs)[:-2]) + [self.shape_of(lhs)[-2], self.shape_of(rhs)[-1]]
        ret_ty = block_type(ret, ret_shape)
        if acc is None:
            acc = self.tile_constant(0, ret, ret_shape)
        elif acc.dtype != ret:
            raise TypeError(f"tl.dot accumulator has dtype {acc.dtype}, but the product of {a} operands "
                            f"(out_dtype={out_dtype}) is {ret}")
        if max_num_imprecise_acc is None:
            if a.is_fp8() and b.is_fp8():
                max_num_imprecise_acc = getattr(self.options, "max_num_imprecise_acc_default", None)
        elif a.is_fp8() and b.is_fp8() and max_num_imprecise_acc > self.shape_of(lhs)[-1]:
            raise ValueError(f"max_num_imprecise_acc ({max_num_imprecise_acc}) must be <= K "
                             f"({self.shape_of(lhs)[-1]})")
        if a.is_fp32() and precision in _BF16_PIECES:
            return self._dot_bf16xn(lhs, rhs, acc, _BF16_PIECES[precision])
        attrs = A.DotAttrs(input_precision=precision, max_num_imprecise_acc=max_num_imprecise_acc)
        return self.emit_tensor(ir.Op.DOT, lhs, rhs, acc, attrs=attrs, type=ret_ty)

    def _split_bf16(self, x: tensor, pieces: int) -> list[tensor]:
        """f32 `x` as bf16 pieces hi, mid[, lo]: each the bf16 rounding of what the
        pieces before it leave of `x` (their sum is `x` to about 8 bits per piece)."""
        parts = []
        for i in range(pieces):
            part = self.cast(x, T.bfloat16)
            if i != pieces - 1:
                x = self.sub(x, self.cast(part, T.float32))
            parts.append(part)
        return parts

    def _dot_bf16xn(self, lhs: tensor, rhs: tensor, acc: tensor, pieces: int) -> tensor:
        """`acc + lhs @ rhs` for f32 operands from bf16 dots, as Triton's F32DotTC pass
        rewrites `input_precision="bf16x3"` (2 pieces: mid*hi, hi*mid, then hi*hi) and
        "bf16x6" (3 pieces: mid*mid, lo*hi, hi*lo first). The small products are summed
        first, in that order, so the large one rounds last; a NaN among them (an infinite
        operand times a zero piece) is dropped so that hi*hi alone decides the
        non-finite result. Doing it here gives every backend Triton's numerics."""
        a, b = self._split_bf16(lhs, pieces), self._split_bf16(rhs, pieces)
        hi, mid, lo = 0, 1, 2
        order = [(mid, hi), (hi, mid)]
        if pieces == 3:
            order = [(mid, mid), (lo, hi), (hi, lo)] + order
        shape = [int(s) for s in acc.shape]
        result = self.tile_constant(0, T.float32, shape)
        for i, j in order:
            result = self._dot_3d(a[i], b[j], result, "ieee", None, T.float32)
        result = self.where(self.not_equal(result, result), 0.0, result)
        result = self._dot_3d(a[hi], b[hi], result, "ieee", None, T.float32)
        return self.add(result, acc)
