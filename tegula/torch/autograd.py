"""`autograd_function`: a differentiable Python function from a forward and a backward
(each typically launching tegula kernels), as a `torch.autograd.Function`.

The split mirrors `CustomOpDef.register_autograd`: `forward(*inputs)` computes the
outputs, `setup_context(ctx, inputs, output)` saves what the backward needs
(`ctx.save_for_backward`, attributes), `backward(ctx, *grads)` returns one gradient per
input (None for non-differentiable ones). torch.compile traces the Function (Dynamo
supports `autograd.Function`), and the launches inside become their custom ops.
For an operator that export and `torch.library` tooling also see, prefer
`triton_op(...)` plus `op.register_autograd(backward, setup_context=...)`.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch


def autograd_function(forward: Callable[..., Any], backward: Callable[..., Any], *,
                      setup_context: Optional[Callable[..., None]] = None,
                      name: Optional[str] = None) -> Callable[..., Any]:
    """`Function.apply` of a new `torch.autograd.Function` made of these pieces; without
    `setup_context` every tensor input is saved (`ctx.saved_tensors`)."""

    def save_inputs(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.save_for_backward(*[x for x in inputs if isinstance(x, torch.Tensor)])

    setup = setup_context or save_inputs

    def fwd(*args: Any) -> Any:
        return forward(*args)

    def ctx_setup(ctx: Any, inputs: tuple, output: Any) -> None:
        setup(ctx, inputs, output)

    def bwd(ctx: Any, *grads: Any) -> Any:
        return backward(ctx, *grads)

    cls_name = name or f"{getattr(forward, '__name__', 'tegula')}_function"
    cls = type(cls_name, (torch.autograd.Function,), {
        "forward": staticmethod(fwd),
        "setup_context": staticmethod(ctx_setup),
        "backward": staticmethod(bwd),
    })
    return cls.apply
