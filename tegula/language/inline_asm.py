"""`tl.inline_asm_elementwise`: the user's PTX run over tiles, `pack` elements per
execution (Triton 3.6's semantics).

The arguments become tensors broadcast to one shape; each execution of the assembly
gets `pack` elements of every argument (which elements is unspecified, as in Triton)
and writes `pack` elements of every output. In the constraint string the outputs come
first (`=r`...), then the inputs; an argument or output narrower than 32 bits has
min(32 / bits, pack) elements packed into each 32-bit register, so its operands per
execution are pack / that many registers (the CUDA backend's
`lower_inline_asm.register_groups` is that rule).

`dtype` may be a tuple: the call then returns a tuple of tensors. The IR has one op per
output, each running the assembly and keeping its own output (`InlineAsmAttrs.index`);
that repeats the work of a pure assembly, and is refused for one with side effects,
which would run them once per output.

Only NVIDIA GPUs run it: the interpreter, the CPU backend and the host emulator refuse
a kernel that reaches this op with an error naming the kernel line — except the
one-instruction f32 approximations (`tanh.approx.f32 $0, $1;`, `ex2.approx.f32`, ...),
which the interpreter and the CPU backend run as the function approximated
(`ir/ptx_equivalents.py`).
"""
from __future__ import annotations

from .. import ir
from ..ir import attrs as A
from .constexpr import unwrap_constexpr
from .core import builtin
from .dtypes import as_dtype, block_type


@builtin
def inline_asm_elementwise(sem, asm, constraints, args, dtype, is_pure, pack):
    asm, constraints = unwrap_constexpr(asm), unwrap_constexpr(constraints)
    is_pure, pack = bool(unwrap_constexpr(is_pure)), unwrap_constexpr(pack)
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise TypeError("inline_asm_elementwise: asm and constraints must be strings")
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1:
        raise ValueError(f"inline_asm_elementwise: pack must be a positive integer, got {pack!r}")
    dtype = unwrap_constexpr(dtype)
    several = isinstance(dtype, (tuple, list))
    outputs = [as_dtype(unwrap_constexpr(d)) for d in (dtype if several else [dtype])]
    if not outputs:
        raise ValueError("inline_asm_elementwise needs at least one output dtype (Triton's rule: "
                         "return a dummy one if the assembly has no result)")
    if several and len(outputs) > 1 and not is_pure:
        raise NotImplementedError("inline_asm_elementwise with several outputs and is_pure=False: tegula "
                                  "computes each output by its own execution of the assembly, which would "
                                  "repeat its side effects")
    xs = [sem.to_tensor(unwrap_constexpr(a)) for a in unwrap_constexpr(args)]
    xs = list(sem.broadcast_tensors(*xs, op="inline_asm_elementwise")) if xs else []
    shape = list(xs[0].shape) if xs else []
    attrs = dict(asm=asm, constraints=constraints, pack=pack, is_pure=is_pure,
                 outputs=tuple(str(d.to_ir()) for d in outputs))
    results = []
    for index, d in enumerate(outputs):
        ty = block_type(d, shape) if shape else d
        results.append(sem.emit_tensor(ir.Op.INLINE_ASM, *xs, attrs=A.InlineAsmAttrs(**attrs, index=index), type=ty))
    return tuple(results) if several else results[0]
