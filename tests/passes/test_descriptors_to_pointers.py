"""`descriptors_to_pointers` (with its cleanup, `lower_descriptors`): translation
validation on the interpreter — the rewritten kernel computes what the descriptor ops
computed — over 1-, 2- and 3-D descriptors, zero and NaN padding, bf16 and bool
elements, stores that clip and a reduction, on sizes that are not multiples of the
block; and a `keep` predicate leaves the claimed accesses (and their descriptor) alone."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.ir import verify
from tegula.ir.ops import DESCRIPTOR_OPS, Op
from tegula.passes import lower_descriptors
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def copy3d(x_ptr, y_ptr, A, B, C, sa, sb, BA: tl.constexpr, BB: tl.constexpr, BC: tl.constexpr,
           PAD: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [A, B, C], [sa, sb, 1], [BA, BB, BC], padding_option=PAD)
    dst = tl.make_tensor_descriptor(y_ptr, [A, B, C], [sa, sb, 1], [BA, BB, BC])
    a, b, c = tl.program_id(0) * BA - 1, tl.program_id(1) * BB, tl.program_id(2) * BC
    t = src.load([a, b, c])
    dst.store([a, b, c], tl.where(t == t, t + 1, -5.0).to(y_ptr.dtype.element_ty))


@tegula.jit
def rows(x_ptr, y_ptr, acc_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    acc = tl.make_tensor_descriptor(acc_ptr, [N], [1], [BN])
    m = tl.program_id(0) * BM
    for n in range(0, N, BN):
        t = src.load([m, n])
        dst.store([m, n], t)
        acc.atomic_add([n], tl.sum(t.to(tl.int32), axis=0))


def _ir(fn, sig, cx):
    return optimized_ir(ASTSource(fn, signature=sig, constexprs=cx))


def _both(kernel, grid, make_args):
    """Outputs of the kernel as it is and as rewritten, on equal fresh inputs."""
    lowered = lower_descriptors(kernel)
    verify(lowered, stage="tir_opt")
    assert not {i.op for i in lowered.walk()} & DESCRIPTOR_OPS
    assert {i.op for i in kernel.walk()} & DESCRIPTOR_OPS  # the input is left alone
    outs = []
    for k in (kernel, lowered):
        args = make_args()
        execute(k, grid, args)
        outs.append([a for a in args if isinstance(a, np.ndarray)])
    return outs


@pytest.mark.parametrize("dtype, pad", [(np.float32, "zero"), (np.float32, "nan"), ("bf16", "nan"),
                                        (np.int16, "zero")])
def test_three_dimensional_block_with_padding(dtype, pad):
    A, B, C = 5, 7, 19
    sig_t = {np.float32: "fp32", "bf16": "bf16", np.int16: "i16"}[dtype]
    sig = {"x_ptr": f"*{sig_t}", "y_ptr": f"*{sig_t}", "A": "i32", "B": "i32", "C": "i32", "sa": "i32", "sb": "i32",
           "BA": "constexpr", "BB": "constexpr", "BC": "constexpr", "PAD": "constexpr"}
    kernel = _ir(copy3d, sig, {"BA": 2, "BB": 4, "BC": 8, "PAD": pad})
    rng = np.random.default_rng(7)
    store = np.uint16 if dtype == "bf16" else dtype
    x = (rng.integers(-50, 50, (A, B, C)) if dtype == np.int16
         else rng.standard_normal((A, B, C)).astype(np.float32))
    x = x.astype(np.float32).view(np.uint32) >> 16 if dtype == "bf16" else x.astype(store)

    def make_args():
        return [x.astype(store).copy(), np.full((A, B, C), 3, store), A, B, C, B * C, C]
    grid = (4, 2, 3)
    (x0, y0), (x1, y1) = _both(kernel, grid, make_args)
    np.testing.assert_array_equal(y0, y1)
    if dtype != "bf16":  # the blocks cover the tensor (the first starts one row before it)
        np.testing.assert_array_equal(y0, x + 1)


@pytest.mark.parametrize("M, N", [(9, 40), (16, 32)])
def test_loop_of_loads_stores_and_reductions(M, N):
    sig = {"x_ptr": "*i1", "y_ptr": "*i1", "acc_ptr": "*i32", "M": "i32", "N": "i32", "BM": "constexpr",
           "BN": "constexpr"}
    kernel = _ir(rows, sig, {"BM": 8, "BN": 16})
    x = np.random.default_rng(M).integers(0, 2, (M, N)).astype(bool)

    def make_args():
        return [x.copy(), np.zeros((M, N), bool), np.zeros(N, np.int32), M, N]
    (_, y0, acc0), (_, y1, acc1) = _both(kernel, ((M + 7) // 8, 1, 1), make_args)
    np.testing.assert_array_equal(y0, x)
    np.testing.assert_array_equal(y1, x)
    np.testing.assert_array_equal(acc0, x.sum(axis=0))
    np.testing.assert_array_equal(acc1, acc0)


def test_keep_leaves_claimed_accesses_and_their_descriptor():
    sig = {"x_ptr": "*i1", "y_ptr": "*i1", "acc_ptr": "*i32", "M": "i32", "N": "i32", "BM": "constexpr",
           "BN": "constexpr"}
    kernel = _ir(rows, sig, {"BM": 8, "BN": 16})
    lowered = lower_descriptors(kernel, keep=lambda ins: ins.op is Op.DESCRIPTOR_LOAD)
    ops = [i.op for i in lowered.walk()]
    assert ops.count(Op.DESCRIPTOR_LOAD) == 1 and Op.DESCRIPTOR_STORE not in ops
    assert ops.count(Op.MAKE_TENSOR_DESCRIPTOR) == 1  # the loaded one's only
    verify(lowered)
