"""tegula with PyTorch: kernels inside `torch.compile`, custom ops and autograd.

Importing torch is enough for `kernel[grid](...)` launches on torch tensors to compile
without a graph break under `torch.compile` (tegula imports this package when it sees
torch loaded; see `dynamo.py` and `launch_ops.py`). The functions here are the
`torch.library`-style wrappers users expect (docs/pytorch.md).

Every module of this package imports PyTorch as `import torch` (absolute), never through
a relative name, so this package, `tegula.torch`, cannot shadow it.
"""
from __future__ import annotations

from . import dynamo as _dynamo
from .dynamo import routing
from .launch_ops import op_for

_dynamo.install()

__all__ = ["op_for", "routing"]
