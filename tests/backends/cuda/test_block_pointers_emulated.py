"""Block pointers on the CUDA backend: its `cuda.lower_block_pointers` pass runs first
in `cuda_tgir`, so every block-pointer pattern (for, if, while, stores, bool, each
dimension checked, zero and NaN padding) runs on the host emulator at sm_80 and sm_90
exactly as the interpreter runs the ops; a fp16 block-pointer matmul advanced along K
is software-pipelined (its loads become cp.async copies, the loop carries the two
offsets only) and matches float64 numpy; ptxas assembles it for both. Checked mode
reports a block stored past its buffer at the user's line."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.ir.ops import BLOCK_POINTER_OPS, Op
from tegula.runtime.compiler import optimized_ir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "passes"))
from block_pointer_kernels import CASES, inputs, matmul_bp  # noqa: E402


def _ir(fn, sig, cx):
    return optimized_ir(ASTSource(fn, signature=sig, constexprs=cx))


def _outputs(run, grid, args):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run(grid, args)
    return [a for a in args if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("cap", [80, 90])
@pytest.mark.parametrize("name", sorted(CASES))
def test_emulator_runs_block_pointers_as_the_interpreter(name, cap):
    kernel = _ir(*CASES[name])
    grid, args = inputs(name, np.random.default_rng(cap))
    want = _outputs(lambda g, a: execute(kernel, g, a), grid, args)
    ek = EmulatedKernel(kernel, 4, capability=cap)
    got = _outputs(ek.run, grid, args)
    for w, g in zip(want, got):
        if name in ("matmul", "row_sums"):  # dots and tl.sum add in another order on the GPU
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, w)


FP16_SIG = {**CASES["matmul"][1], "a_ptr": "*fp16", "b_ptr": "*fp16"}
FP16_CX = {"BM": 32, "BN": 32, "BK": 16}


@pytest.mark.parametrize("cap", [80, 90])
def test_fp16_block_pointer_matmul_is_pipelined(cap):
    kernel = _ir(matmul_bp, FP16_SIG, FP16_CX)
    ek = EmulatedKernel(kernel, 4, capability=cap, num_stages=3)
    staged = ek.lowering.kernel  # the tgir the lowering saw
    ops = [i.op for i in staged.walk()]
    assert Op.ASYNC_COPY in ops and not set(ops) & BLOCK_POINTER_OPS
    # the loop carries no base pointer, shape or stride: only scalar i32s (the offsets,
    # the ring's indices) besides tiles
    loop = next(i for i in staged.walk() if i.op is Op.FOR)
    scalars = [r.type for r in loop.results if not str(r.type).startswith("tile<")]
    assert scalars and all(str(t) == "i32" for t in scalars)
    m, n, k = 50, 37, 45
    rng = np.random.default_rng(cap)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)  # b.T through strides (1, k)
    c = np.zeros((m, n), np.float32)
    ek.run((2, 2, 1), [a, b, c, m, n, k, k, 1, 1, k, n, 1])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=2e-3, atol=2e-3)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("cap", [80, 90])
def test_ptxas_assembles_the_block_pointer_matmul(cap):
    asm, md = compile_kernel(_ir(matmul_bp, FP16_SIG, FP16_CX), {"num_warps": 4, "num_stages": 3}, cap)
    assert "blockptr" not in asm["tgir"] and "cp.async" in asm["ptx"]
    assert asm["cubin"][:4] == b"\x7fELF" and md["n_spills"] == 0


def test_checked_mode_reports_an_unchecked_block_past_its_buffer():
    """Debug (checked) mode bounds-checks the pointer code the pass made: a third program
    storing where the output has room for two is reported at the user's line."""
    from tegula.errors import OutOfBoundsError
    kernel = _ir(*CASES["pad_zero"])
    ek = EmulatedKernel(kernel, 4, debug=True, capability=80)
    with pytest.raises(OutOfBoundsError, match="out-of-bounds store in kernel 'pad_1d': pointer argument 'out_ptr'"
                       ) as info:
        ek.run((3, 1, 1), [np.zeros(20, np.float32), np.zeros(32, np.float32), 10, 2])
    assert "block_pointer_kernels.py" in str(info.value) and "tl.store(q, v)" in str(info.value)
