"""`tl.extra.cuda`: Triton's CUDA extras. `libdevice` is the same module as
`tl.extra.libdevice`; `gdc_wait` / `gdc_launch_dependents` are programmatic dependent
launch (see `gdc`)."""
from .. import libdevice
from .gdc import gdc_launch_dependents, gdc_wait

__all__ = ["gdc_launch_dependents", "gdc_wait", "libdevice"]
