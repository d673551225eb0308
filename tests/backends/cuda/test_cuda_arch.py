"""The `arch` launch option and TRITON_OVERRIDE_ARCH (Triton 3.6): the kernel is lowered
for the named, older architecture — sm80's mma.sync instead of sm_90a's wgmma, sm70's
FMA dots without cp.async — while the PTX and cubin stay the device's, so it runs
there; an unknown arch, or one newer than the device, is a ValueError naming it. The
emulator runs the sm80 lowering under an sm90 "device" as the GPU would."""
from __future__ import annotations

import numpy as np
import pytest
from emulated_backend import EmulatedCudaBackend

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.compiler import ASTSource
from tegula.runtime import backend_registry

HOPPER = GPUTarget("cuda", 90, 32)


@tegula.jit
def matmul(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for kk in range(0, K, BK):
        x = tl.load(a + m[:, None] * K + (kk + k)[None, :])
        y = tl.load(b + (kk + k)[:, None] * BN + n[None, :])
        acc = tl.dot(x, y, acc)
    tl.store(c + m[:, None] * BN + n[None, :], acc)


SIG = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "K": "i32"}
META = {"BM": 64, "BN": 64, "BK": 32}


def _ptx(options=None):
    ck = tegula.compile(ASTSource(matmul, SIG, META), target=HOPPER, options=options)
    ptx = ck.asm["ptx"]
    assert ".target sm_90a" in ptx  # the device's, whatever the lowering's
    if find_ptxas() is not None:
        assert ck.asm["cubin"][:4] == b"\x7fELF"
    return ck, ptx


@pytest.mark.parametrize("arch, wgmma, mma_sync, cp_async", [
    (None, True, False, True), ("sm90", True, False, True), ("sm80", False, True, True),
    ("sm_80", False, True, True), ("sm70", False, False, False)])
def test_arch_picks_the_lowering(arch, wgmma, mma_sync, cp_async):
    ck, ptx = _ptx({"arch": arch} if arch else None)
    assert ("wgmma" in ptx, "mma.sync" in ptx, "cp.async" in ptx) == (wgmma, mma_sync, cp_async)
    assert ck.metadata.lowered_for == (int(arch.lstrip("sm_")) if arch else 90)


def test_override_arch_variable_and_the_option_wins(monkeypatch):
    monkeypatch.setenv("TRITON_OVERRIDE_ARCH", "sm80")
    ck, ptx = _ptx()
    assert ck.metadata.lowered_for == 80 and "wgmma" not in ptx
    ck, ptx = _ptx({"arch": "sm90"})  # a launch's own arch wins, as in Triton
    assert ck.metadata.lowered_for == 90 and "wgmma" in ptx


@pytest.mark.parametrize("arch, message", [
    ("hopper", r"arch must have the form sm<capability>"),
    ("sm95", r"arch='sm95': tegula's CUDA backend compiles for sm70, .*sm90"),
    ("sm100", r"arch='sm100' asks for the instructions of sm_100, which the target sm_90 lacks")])
def test_bad_arch_is_a_value_error(arch, message):
    with pytest.raises(ValueError, match=message):
        tegula.compile(ASTSource(matmul, SIG, META), target=HOPPER, options={"arch": arch})


def test_launch_with_arch_runs_the_sm80_lowering_on_sm90(monkeypatch):
    monkeypatch.setattr(EmulatedCudaBackend, "capability", 90)
    original = backend_registry._FACTORIES["cpu"]
    backend_registry.register_backend("cpu", EmulatedCudaBackend)
    try:
        matmul.clear_cache()
        rng = np.random.default_rng()
        K = 64
        a = rng.standard_normal((64, K)).astype(np.float16)
        b = rng.standard_normal((K, 64)).astype(np.float16)
        want = a.astype(np.float32) @ b.astype(np.float32)
        for how in ("option", "variable"):
            c = np.zeros((64, 64), np.float32)
            if how == "option":
                h = matmul[(1,)](a, b, c, K, arch="sm80", **META)
            else:
                monkeypatch.setenv("TRITON_OVERRIDE_ARCH", "sm80")
                h = matmul[(1,)](a, b, c, K, **META)
                monkeypatch.delenv("TRITON_OVERRIDE_ARCH")
            assert h.metadata.lowered_for == 80
            np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3)
        # the variable is part of the launch's key: without it, the device's lowering
        h = matmul[(1,)](a, b, np.zeros((64, 64), np.float32), K, **META)
        assert h.metadata.lowered_for == 90
    finally:
        backend_registry.register_backend("cpu", original)
        matmul.clear_cache()
