"""`tl.const` pointers through the CUDA backend (compiled ahead of time, no GPU
needed): const kernel arguments lower like plain ones, and a tensor descriptor over a
const base (made through a bitcast that only drops the const) is still one the host
encodes a TMA map for."""
from __future__ import annotations

import tegula as triton
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.tma import tensormap_spec
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir
from tegula.runtime.source import ASTSource


@triton.jit
def _desc_copy(in_ptr: tl.const, out, BLOCK: tl.constexpr):
    d = tl.make_tensor_descriptor(in_ptr, [BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs[:, None] * BLOCK + offs[None, :], d.load([0, 0]))


def test_a_descriptor_over_a_const_argument_keeps_its_tensor_map():
    src = ASTSource(_desc_copy, {"in_ptr": "*kfp32", "out": "*fp32"}, {"BLOCK": 16}, {"in_ptr": 16, "out": 16})
    kernel = optimized_ir(src)
    make = next(ins for ins in kernel.walk() if ins.op is Op.MAKE_TENSOR_DESCRIPTOR)
    assert make.operands[0].owner.op is Op.BITCAST  # the const dropped
    spec = tensormap_spec(make, kernel)
    assert spec is not None and spec.base == ("arg", 0)


def test_const_arguments_compile_to_ptx():
    h = triton.compile(ASTSource(_desc_copy, {"in_ptr": "*kfp32", "out": "*fp32"}, {"BLOCK": 16}),
                       target=GPUTarget("cuda", 90, 32))
    assert h.metadata.signature["in_ptr"] == "*kfp32"
    assert ".entry _desc_copy(" in h.asm["ptx"]
