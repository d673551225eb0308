"""The order in which `tl.sum` combines a float tile on the GPU is Triton's
(`backends/cuda/lower_reduce.py`): each thread sums its values in axis order, the lanes
fold by a butterfly from the highest lane bit down, the warps' partials by the same
butterfly over warp order. A library's tests compare its kernels' sums with torch under
tolerances tuned on Triton's results; where a sum cancels to near zero only the
rounding of the order is left (liger-kernel's group norm: a bias gradient of -0.2676
summed from 131072 values of size ~1 passed at atol 1e-4 under Triton and failed with
lanes folded 1, 2, 4, 8, 16). The emulator runs the lowering's code; the reference here
replays Triton's order in float32 with numpy, and must give the same bits."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def _row_sum(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + tl.program_id(0) * BLOCK + offs)))


def _triton_order_sum(x: np.ndarray, warps: int, per_thread: int = 4, lanes_high_first: bool = True,
                      partials_by_halves: bool = True) -> np.float32:
    """`x` summed in float32 as a CTA of `warps` warps does with a blocked layout of
    `per_thread` consecutive elements per thread (Triton's layout for this load)."""
    threads = 32 * warps
    # thread t's values in axis order: per_thread consecutive ones, every chunk
    vals = x.reshape(-1, threads, per_thread).transpose(1, 0, 2).reshape(threads, -1)
    acc = vals[:, 0].copy()
    for j in range(1, vals.shape[1]):
        acc = (acc + vals[:, j]).astype(np.float32)
    acc = acc.reshape(warps, 32)
    bits = [16, 8, 4, 2, 1] if lanes_high_first else [1, 2, 4, 8, 16]
    for off in bits:
        acc = (acc + acc[:, np.arange(32) ^ off]).astype(np.float32)
    parts = list(acc[:, 0])
    while len(parts) > 1:
        if partials_by_halves:
            half = len(parts) // 2
            parts = [np.float32(parts[i] + parts[i + half]) for i in range(half)]
        else:
            parts = [np.float32(parts[i] + parts[i + 1]) for i in range(0, len(parts), 2)]
    return np.float32(parts[0])


@pytest.mark.parametrize("block,warps", [(8192, 4), (4096, 8), (2048, 2)])
def test_float_sum_in_tritons_order(block, warps):
    rows = 16
    # pointers 16-byte aligned, as a launch on torch tensors specializes them
    src = ASTSource(_row_sum, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "BLOCK": "constexpr"},
                    constexprs={"BLOCK": block}, attrs={"x_ptr": 16, "out_ptr": 16})
    kernel = optimized_ir(src)
    # the layout the reference assumes is the one tegula (and Triton) pick for this load
    tgir = tegula.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["tgir"]
    assert f"#blocked<spt=[4], tpw=[32], wpc=[{warps}], order=[0]>" in tgir
    rng = np.random.default_rng(block + warps)
    # sums that cancel: what is left is the rounding of the order
    x = rng.standard_normal((rows, block)).astype(np.float32)
    x -= x.mean(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    out = np.zeros(rows, np.float32)
    EmulatedKernel(kernel, warps, capability=90).run((rows, 1, 1), [x, out])
    want = np.array([_triton_order_sum(r, warps) for r in x], np.float32)
    np.testing.assert_array_equal(out, want)
    # the reference tells the orders apart on these inputs (the test can fail)
    other = np.array([_triton_order_sum(r, warps, lanes_high_first=False, partials_by_halves=False) for r in x],
                     np.float32)
    assert (other != want).any()
