"""`tl.extra`: Triton's extra function libraries. `libdevice` is the target-neutral name
(`triton.language.extra.libdevice`); `cuda` holds what Triton files under its CUDA
backend (`tl.extra.cuda.libdevice`)."""
from . import cuda, libdevice

__all__ = ["cuda", "libdevice"]
