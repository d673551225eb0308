"""`tl.extra.cuda`: Triton's CUDA extras. `libdevice` is the same module as
`tl.extra.libdevice`; `gdc_wait` / `gdc_launch_dependents` are programmatic dependent
launch (see `gdc`); `smid`, `globaltimer`, `num_warps`, `num_threads` ask about the
hardware running the program (see `hardware`)."""
from .. import libdevice
from .gdc import gdc_launch_dependents, gdc_wait
from .hardware import globaltimer, num_threads, num_warps, smid

__all__ = ["gdc_launch_dependents", "gdc_wait", "globaltimer", "libdevice", "num_threads", "num_warps", "smid"]
