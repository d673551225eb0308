"""The hand-built kernels on a real GPU (through the backend's driver and launcher),
against the interpreter; plus checked mode and argument handling on the device.
Skipped where there is no CUDA GPU."""
from __future__ import annotations

import cuda_kernels as ck
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from gpu_runner import compare, expected, run_case  # noqa: E402

from tegula.errors import KernelArgumentError, OutOfBoundsError  # noqa: E402

CASES = [c for c in ck.all_cases() if c.name != "device_print"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gpu_matches_interpreter(case):
    got, _info = run_case(case, torch)
    assert not compare(case, got, expected(case))


def test_device_print_runs(capfd):
    run_case(ck.device_print(), torch)
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    assert "pid (0, 0, 0) idx (3) x: 3" in out


def test_checked_mode_raises_out_of_bounds():
    with pytest.raises(OutOfBoundsError) as info:
        run_case(ck.out_of_bounds(), torch, debug=True)
    assert info.value.pid == (0, 0, 0) and "offset 100" in str(info.value)


def test_host_array_is_rejected():
    from tegula.backends.cuda.launcher import pointer_of
    with pytest.raises(KernelArgumentError, match="host memory"):
        pointer_of(torch.zeros(4), "x", "k")
    with pytest.raises(KernelArgumentError, match="host memory"):
        pointer_of(np.zeros(4), "x", "k")
