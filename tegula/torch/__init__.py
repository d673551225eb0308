"""tegula with PyTorch: kernels inside `torch.compile`, custom ops and autograd.

Importing torch is enough for `kernel[grid](...)` launches on torch tensors to compile
without a graph break under `torch.compile` (tegula imports this package when it sees
torch loaded; see `dynamo.py` and `launch_ops.py`). The functions here are the
`torch.library`-style wrappers users expect (docs/pytorch.md):

- `triton_op(name, mutates_args=...)`, `wrap_triton(kernel)` (`ops.py`);
- `autograd_function(forward, backward, setup_context=...)` (`autograd.py`);
- `routing()`, `op_for(...)`: the launch ops themselves.

Every module of this package imports PyTorch as `import torch` (absolute), never through
a relative name, so this package, `tegula.torch`, cannot shadow it.
"""
from __future__ import annotations

from . import dynamo as _dynamo
from .autograd import autograd_function
from .dynamo import routing
from .launch_ops import op_for
from .ops import triton_op, wrap_triton

_dynamo.install()

__all__ = ["autograd_function", "op_for", "routing", "triton_op", "wrap_triton"]
