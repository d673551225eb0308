"""`tl.extra.cuda`: Triton's CUDA extras. `libdevice` is the same module as
`tl.extra.libdevice`."""
from .. import libdevice

__all__ = ["libdevice"]
