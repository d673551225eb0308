"""Tensor maps (`CUtensorMap`) encoded at launch for the kernel's TMA descriptors.

Each TMA descriptor of a compiled kernel has a `tma.TensorMapSpec` in the metadata
(`tensormaps`): where its base, shape and strides come from among the launch's
arguments, and its element type, box, swizzle and fill. `TensorMapEncoder.address(
values)` returns the address of a 128-byte map for one launch, encoded with
`cuTensorMapEncodeTiled` (cuda-bindings, the driver API) and cached by (base address,
dims, strides): a warm launch with the same tensors does one dict lookup per map; the
launcher hands the address to `cuLaunchKernel`, which copies the 128 bytes into the
kernel's `.param .align 64 .b8 [128]` parameter.

`encode_args` (dims and byte strides, innermost first, as the driver takes them) is
shared with the emulator, which packs the same numbers into its host model's map.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ...errors import KernelArgumentError
from . import driver as drv
from .tma import ENCODABLE_BYTES, TensorMapSpec

_CACHE_LIMIT = 4096


def encode_args(spec: TensorMapSpec, base: int, shape: Sequence[int], strides: Sequence[int],
                kernel: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(dims, byte strides of the outer dims), innermost first, checked against TMA's
    rules with the messages a user can act on."""
    eb = ENCODABLE_BYTES[spec.element]
    dims = tuple(int(d) for d in reversed(shape))
    byte_strides = tuple(int(s) * eb for s in reversed(strides[:-1]))
    if base % 16:
        raise KernelArgumentError(f"kernel '{kernel}': a TMA tensor descriptor's base address must be 16-byte "
                                  f"aligned, got {base:#x}")
    if any(d <= 0 or d > 2**32 for d in dims):
        raise KernelArgumentError(f"kernel '{kernel}': a TMA tensor descriptor's shape must be in [1, 2**32], "
                                  f"got {list(shape)}")
    if any(s % 16 or s <= 0 or s >= 2**40 for s in byte_strides):
        raise KernelArgumentError(f"kernel '{kernel}': a TMA tensor descriptor's strides must be positive "
                                  f"multiples of 16 bytes below 2**40, got {list(strides)} elements")
    return dims, byte_strides


def encode_map(spec: TensorMapSpec, base: int, dims: tuple[int, ...], byte_strides: tuple[int, ...]) -> Any:
    cu = drv.cu()
    byte = cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8  # 8-bit elements move as bytes
    dtype = {"f16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             "bf16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             "f32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
             "f8e4m3": byte, "f8e5m2": byte, "i8": byte, "u8": byte}[spec.element]
    swizzle = {32: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
               64: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
               128: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B}[spec.swizzle]
    fill = (cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA if spec.nan_fill
            else cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    # cuda-bindings takes the rank and the arrays as its own cuuint32_t / cuuint64_t
    # objects (a plain int is a TypeError there)
    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    return drv.check(cu.cuTensorMapEncodeTiled(
        dtype, u32(len(dims)), base, [u64(d) for d in dims], [u64(s) for s in byte_strides],
        [u32(b) for b in spec.box], [u32(1)] * len(dims),
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B, fill), "cuTensorMapEncodeTiled")


class TensorMapEncoder:
    """The maps of one descriptor of one kernel, cached by what they encode."""

    def __init__(self, spec: TensorMapSpec, kernel: str, encode: Optional[Callable] = None) -> None:
        self.spec = spec
        self.kernel = kernel
        self.encode = encode or encode_map
        self.cache: dict[tuple, tuple[Any, int]] = {}

    def address(self, base: int, shape: Sequence[int], strides: Sequence[int]) -> int:
        """The address of the map of this tensor (encoded on first use)."""
        key = (base, *shape, *strides)
        hit = self.cache.get(key)
        if hit is None:
            dims, byte_strides = encode_args(self.spec, base, shape, strides, self.kernel)
            tmap = self.encode(self.spec, base, dims, byte_strides)
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()
            hit = self.cache[key] = (tmap, int(tmap.getPtr()))  # the object keeps the bytes alive
        return hit[1]
