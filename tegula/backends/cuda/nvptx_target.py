"""The NVPTX answers to the scalar lowering's target questions: math through libdevice
(`__nv_*`, linked in by `codegen`) or single PTX instructions, and the conversions PTX
does in hardware (fp8 on sm_89+, round-toward-zero narrowing). The instructions
themselves are the device's (`nvvm.NVPTXDevice`), so the host emulator's device runs
these same choices with its models of them.

Accuracy (vs the numpy interpreter), chosen to match what Triton 3.6 emits:
- f32 `exp` is `ex2.approx.f32(x * log2(e))`, Triton's instruction sequence: ex2's own
  error is ~2 ulp, and rounding the product adds a relative error up to about
  |x|·2^-24 (so ~2 ulp near 0, growing with |x|: ~10 ulp at |x| = 16, ~45 at 88);
- f32 `exp2` is `ex2.approx.ftz.f32`, Triton's instruction (~2 ulp; a result below
  2^-126 is flushed to zero, a denormal input reads as zero);
- log/log2/sin/cos/erf/fmod, f64 exp and exp2, are libdevice's (≤ 2 ulp for f32 in
  the full range, fmod exact; denormals kept);
- f32 `sqrt` and `rsqrt` are `sqrt.approx.ftz.f32` / `rsqrt.approx.ftz.f32`, Triton's
  instructions (~1 ulp and ~2 ulp; a denormal input counts as zero: sqrt gives 0,
  rsqrt +inf); `sqrt_rn` is IEEE;
- `fdiv` with `ieee_rounding=False` is `div.full.f32` (≤ 2 ulp);
- with `fp_contract` (the `enable_fp_fusion` option, on by default as in Triton) a
  float multiply feeding an add/sub in the same block may become one `fma` (rounded
  once); everything else is correctly rounded.
"""
from __future__ import annotations

from typing import Optional, Sequence

import llvmlite.ir as ir
import numpy as np

from ...ir.types import ScalarType
from ..llvm.scalar_ops import ScalarTarget
from ..llvm.types import BF16, F16, F32, I32
from .nvvm import NVPTXDevice

_LIBDEVICE = {
    "exp": ("__nv_expf", "__nv_exp"), "exp2": ("__nv_exp2f", "__nv_exp2"),
    "log": ("__nv_logf", "__nv_log"), "log2": ("__nv_log2f", "__nv_log2"),
    "sin": ("__nv_sinf", "__nv_sin"), "cos": ("__nv_cosf", "__nv_cos"),
    "erf": ("__nv_erff", "__nv_erf"), "rsqrt": ("__nv_rsqrtf", "__nv_rsqrt"),
    "fmod": ("__nv_fmodf", "__nv_fmod"),
}

# log2(e) rounded to f32 (0x3FB8AA3B, the constant in Triton's PTX)
_LOG2E_F32 = float(np.float32(1.4426950408889634))


class NVPTXTarget(ScalarTarget):
    name = "nvptx"
    # PTX has f16 fma/min/max (and the f32 route would round an fma twice)
    native_half = frozenset({"fabs", "fma", "fmax", "fmin", "fmax_nan", "fmin_nan"})

    def __init__(self, capability: int, fp_contract: bool = True, device: Optional[NVPTXDevice] = None):
        self.capability = capability
        self.fp_contract = fp_contract
        self.dev = device if device is not None else NVPTXDevice()

    def extern(self, b: ir.IRBuilder, symbol: str, args: Sequence[ir.Value], ret: ir.Type) -> ir.Value:
        """libdevice's `symbol` itself (codegen links libdevice when the module calls one)."""
        return self.dev.libdevice_call(b, symbol, args, ret)

    def math(self, b: ir.IRBuilder, name: str, args: Sequence[ir.Value], t: ScalarType) -> ir.Value:
        if t.name == "f32" and name == "exp":
            # Triton's tl.exp: one multiply and the SFU's base-2 exponential (a few
            # instructions, where libdevice's accurate expf takes a dozen)
            flags = ("contract",) if self.fp_contract else ()
            x = b.fmul(args[0], ir.Constant(F32, _LOG2E_F32), flags=flags)
            return self.dev.ex2_approx(b, x)
        if t.name == "f32" and name == "exp2":
            # Triton's tl.math.exp2: one SFU instruction, a result below 2**-126 flushed
            # to zero (libdevice's exp2f keeps denormals with a compare and two
            # multiplies more: 96 of each in every iteration of tutorial 06's backward)
            return self.dev.ex2_approx_ftz(b, args[0])
        if t.name == "f32" and name in ("sqrt", "rsqrt"):
            # Triton's: one SFU instruction, denormal inputs read as zero (the non-ftz
            # form spends 3 more instructions rescaling them)
            sfu = self.dev.sqrt_approx_ftz if name == "sqrt" else self.dev.rsqrt_approx_ftz
            return sfu(b, args[0])
        if name in _LIBDEVICE:
            fn = _LIBDEVICE[name][0 if t.bits <= 32 else 1]
            return self.dev.libdevice_call(b, fn, args, args[0].type)
        if t.name == "f32" and name == "fdiv_fast":
            return self.dev.div_full(b, args[0], args[1])
        return super().math(b, name, args, t)

    def converts_pair(self, src: ScalarType, dst: ScalarType, rounding: str) -> bool:
        """Whether `convert_pair` takes this conversion: f32 to e4m3/e5m2 on sm_89+, f32
        to f16/bf16 on sm_80+ (`cvt.rn.{f16,bf16}x2.f32`)."""
        if src.name != "f32" or rounding != "rtne":
            return False
        return ((self.capability >= 89 and dst.name in ("f8e4m3", "f8e5m2"))
                or (self.capability >= 80 and dst.name in ("f16", "bf16")))

    def convert_pair(self, b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, dst: ScalarType) -> list[ir.Value]:
        """Two f32 converted with one instruction: to fp8 (`cvt_f32x2_to_fp8`) their bit
        patterns; to f16/bf16 a two-lane `fptrunc`, which LLVM emits as one
        `cvt.rn.{f16,bf16}x2.f32` (one per element where the halves of a tile in an
        accumulator's layout go to shared memory one by one, not in a vector)."""
        if dst.name in ("f16", "bf16"):
            pair = ir.VectorType(F32, 2)
            v = b.insert_element(b.insert_element(ir.Constant(pair, ir.Undefined), lo, ir.Constant(I32, 0)),
                                 hi, ir.Constant(I32, 1))
            t = b.fptrunc(v, ir.VectorType(F16 if dst.name == "f16" else BF16, 2))
            return [b.extract_element(t, ir.Constant(I32, k)) for k in (0, 1)]
        return self.dev.cvt_f32x2_to_fp8(b, lo, hi, dst.name)

    def convert(self, b: ir.IRBuilder, v: ir.Value, src: ScalarType, dst: ScalarType,
                rounding: str) -> Optional[ir.Value]:
        # PTX converts e4m3 and e5m2 only; fp8e4b15 takes the portable code (llvm.casts)
        if self.capability >= 89 and src.name == "f32" and dst.name in ("f8e4m3", "f8e5m2"):
            return self.dev.cvt_f32_to_fp8(b, v, dst.name)
        if self.capability >= 89 and src.name in ("f8e4m3", "f8e5m2") and dst.name in ("f16", "f32"):
            return self.dev.cvt_from_fp8(b, v, src.name, dst.name)
        if rounding == "rtz" and src.name == "f32" and dst.name in ("f16", "bf16"):
            if dst.name == "bf16" and self.capability < 80:
                return None
            return self.dev.cvt_rz(b, v, dst.name)
        return None

