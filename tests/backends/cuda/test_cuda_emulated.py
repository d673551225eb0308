"""The CUDA backend's lowering, executed: each hand-built kernel runs on the host
emulator (`backends/cuda/emulator/`: the same LLVM IR with the hardware pieces — ids,
barriers, shuffles, shared memory — provided by the host, one OS thread per GPU thread)
and must match the reference interpreter and a numpy reference."""
from __future__ import annotations

import cuda_kernels as ck
import numpy as np
import pytest

from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.errors import DeviceAssertionError, OutOfBoundsError
from tegula.ir import attrs as A
from tegula.ir.ops import Op

CASES = [c for c in ck.all_cases() if c.name != "device_print"]


def _compare(case, got_args, want: dict, what: str) -> None:
    for i, expected in want.items():
        got = got_args[i]
        expected = np.asarray(expected)
        if case.rtol == 0 and case.atol == 0:
            np.testing.assert_array_equal(got, expected.astype(got.dtype), err_msg=f"{what}, argument {i}")
        else:
            np.testing.assert_allclose(got, expected, rtol=case.rtol, atol=case.atol,
                                       err_msg=f"{what}, argument {i}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_reference_and_interpreter(case):
    args = case.inputs(np.random.default_rng(1))
    ref_args = case.inputs(np.random.default_rng(1))
    EmulatedKernel(case.kernel, case.num_warps).run(case.grid, args)
    with np.errstate(all="ignore"):
        _compare(case, args, case.reference(ref_args), "vs numpy reference")
    if case.extra.get("reference_only"):
        return
    from tegula.backends.interpreter import execute
    interp_args = case.inputs(np.random.default_rng(1))
    with np.errstate(all="ignore"):
        execute(case.kernel, case.grid, interp_args)
    _compare(case, args, {i: interp_args[i] for i in case.outputs}, "vs interpreter")


def test_checked_mode_reports_the_out_of_bounds_load():
    case = ck.out_of_bounds()
    args = case.inputs(np.random.default_rng(0))
    with pytest.raises(OutOfBoundsError) as info:
        EmulatedKernel(case.kernel, 4, debug=True).run(case.grid, args)
    err = info.value
    assert err.pid == (0, 0, 0)
    assert err.loc.file == ck.SRC and err.loc.line > 0
    assert "'x'" in str(err) and "load" in str(err)
    assert "offset 100" in str(err)  # the first element past the 100-element array


def test_checked_mode_accepts_masked_tails():
    case = ck.vector_add(block=128, n=1000)
    args = case.inputs(np.random.default_rng(0))
    EmulatedKernel(case.kernel, 4, debug=True).run(case.grid, args)
    np.testing.assert_allclose(args[2], args[0] + args[1])


def test_checked_mode_reports_device_asserts():
    kb = ck.KB("asserting", [("x", ck.P(ck.I32), 16)])
    idx = kb.arange(64)
    x = kb.load(kb.ptrs(kb.a["x"], idx))
    ok = kb.op(Op.LT, x, kb.splat(kb.const(5, ck.I32), (64,)))
    kb.step()
    kb.b.create(Op.DEVICE_ASSERT, [ok], attrs=A.AssertAttrs("x < 5"))
    kernel = kb.done()
    good = np.zeros(64, np.int32)
    EmulatedKernel(kernel, 2, debug=True).run((2, 1, 1), [good])
    bad = good.copy()
    bad[17] = 9
    with pytest.raises(DeviceAssertionError) as info:
        EmulatedKernel(kernel, 2, debug=True).run((2, 1, 1), [bad])
    assert "x < 5" in str(info.value) and info.value.loc.line > 0
