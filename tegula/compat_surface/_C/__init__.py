"""`triton._C`: the few entry points of Triton's native extension that tools reach for.

Only `libtriton.ir` is here, and only as much of it as PyTorch's mutation analysis of
user kernels uses (`torch/_higher_order_ops/triton_kernel_wrap.py`): `ir.context()`,
`ir.load_dialects(ctx)`, and the module `ASTSource.make_ir` returns, walked through
`walk`/`get_name`/`get_operand`/... (see `compat_surface.ttir_summary`).
"""
from . import libtriton

__all__ = ["libtriton"]
