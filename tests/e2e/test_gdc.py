"""Programmatic dependent launch (tutorial 11): `tl.extra.cuda.gdc_wait()` and
`gdc_launch_dependents()` keep the kernel's meaning on every backend (launches run in
order) and become `griddepcontrol` PTX on sm_90 only; `launch_pdl=True` is accepted."""
from __future__ import annotations

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.runtime.source import ASTSource


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, USE_GDC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if USE_GDC:
        tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if USE_GDC:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, x + y, mask=mask)


def test_chained_launches_see_each_other(on):
    rng = np.random.default_rng()
    n = 1000
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    tmp, out = on(np.zeros(n, np.float32)), on(np.zeros(n, np.float32))
    grid = (triton.cdiv(n, 256),)
    _add[grid](on(x), on(y), tmp, n, BLOCK=256, USE_GDC=True, launch_pdl=True)
    _add[grid](tmp, on(y), out, n, BLOCK=256, USE_GDC=True, launch_pdl=True)  # reads the first's result
    # the second launch adds y to the first's float32 sum: exactly (x + y) + y
    np.testing.assert_array_equal(on.back(out), (x + y) + y)


@pytest.mark.parametrize("cap", [80, 90])
def test_griddepcontrol_only_on_sm90(cap):
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    ck = triton.compile(ASTSource(_add, sig, {"BLOCK": 256, "USE_GDC": True}), target=GPUTarget("cuda", cap, 32))
    ptx = ck.asm["ptx"]
    if cap == 90:
        wait, launch = ptx.index("griddepcontrol.wait;"), ptx.index("griddepcontrol.launch_dependents;")
        assert wait < ptx.index("ld.global") < launch < ptx.index("st.global")
    else:
        assert "griddepcontrol" not in ptx
    if find_ptxas() is not None:
        assert ck.asm["cubin"][:4] == b"\x7fELF"
