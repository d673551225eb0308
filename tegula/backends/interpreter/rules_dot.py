"""Rule of dot: `acc + a @ b` for 2-D tiles and batched 3-D tiles.

What a tensor core computes, per operand types:
- f16 / bf16 / fp8 inputs: products are exact in float32, sums in float32; numpy's
  float32 matmul, then the accumulator is added;
- f32 inputs with `input_precision="tf32"`: each input is first rounded to tf32 (10
  explicit mantissa bits, to nearest with ties away from zero, as `cvt.rna.tf32.f32`);
  products of tf32 values are exact, so the product is taken in float64 and rounded
  once to the result type. `"tf32x3"` and `"ieee"` use the full float32 inputs the
  same way (tf32x3 recovers fp32 accuracy on the GPU);
- f64 inputs: float64;
- integer inputs (int8): exact. 8-bit products summed in float64 are exact for any
  reduction length below 2**37, so BLAS does the work; wider integers use an int64
  matmul. The accumulator is added in int64 and the result wraps to its type.
`max_num_imprecise_acc` (an fp8 accumulation-precision cap on Hopper) is not modelled:
the interpreter accumulates fully in float32.
"""
from __future__ import annotations

import numpy as np

from ...ir import numpy_ops as npo
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import element_of
from .compiler import Compiler
from .registry import Step, rule
from .values import needs_rounding, storage_dtype


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """float32 → the nearest tf32 value (ties away from zero), kept in float32."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    # Adding half an ulp of the 10-bit mantissa to the magnitude bits, then dropping the
    # low 13 bits, rounds the magnitude to nearest with ties away (sign-magnitude format).
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isnan(x), x, rounded)


def _compute(a_t, b_t, precision: str):
    """A function (a, b, acc) → float64/float32/int64 result of acc + a @ b."""
    if a_t.is_int and b_t.is_int:
        if max(a_t.bits, b_t.bits) <= 8:
            def int_small(a, b, acc):
                prod = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
                return prod + np.asarray(acc).astype(np.int64)
            return int_small

        def int_wide(a, b, acc):
            return np.matmul(a.astype(np.int64), b.astype(np.int64)) + np.asarray(acc).astype(np.int64)
        return int_wide
    if a_t.is_int or b_t.is_int:
        raise NotImplementedError(f"dot of {a_t} and {b_t}")
    names = {a_t.name, b_t.name}
    if "f64" in names:
        def f64(a, b, acc):
            return np.matmul(a.astype(np.float64), b.astype(np.float64)) + acc
        return f64
    if "f32" in names:
        tf32 = precision == "tf32"

        def f32(a, b, acc):
            a = a.astype(np.float32)
            b = b.astype(np.float32)
            if tf32:
                a, b = round_to_tf32(a), round_to_tf32(b)
            return np.matmul(a.astype(np.float64), b.astype(np.float64)) + np.asarray(acc, np.float64)
        return f32

    def narrow(a, b, acc):
        return np.matmul(a.astype(np.float32), b.astype(np.float32)) + np.asarray(acc, np.float32)
    return narrow


@rule(Op.DOT)
def dot(ins: Instr, c: Compiler) -> Step:
    a, b, acc = c.slots(ins.operands)
    o = c.slot(ins.result)
    a_t, b_t = (element_of(v.type) for v in ins.operands[:2])
    out_t = element_of(ins.result.type)
    precision = ins.attrs.input_precision if ins.attrs is not None else "ieee"
    compute = _compute(a_t, b_t, precision)
    dt = storage_dtype(out_t)
    rounding = needs_rounding(out_t)

    def step(env):
        r = compute(env[a], env[b], env[acc])
        env[o] = npo.round_to_type(r, out_t).astype(np.float32) if rounding else r.astype(dt)
    return step
