"""`backends/llvm/host_jit`'s guard against an LLVM code-generator crash on AVX-512
hosts: a module whose optimized form holds a vector `and` with a trailing-poison
constant (what LLVM 22's X86 combineAVX512SetCCToKMOV asserts on, aborting the
process) gets those lanes set to 0 before code generation. The crash itself needs the
right SLP output (Inductor's sort_with_index over 64 values on an AVX-512 host: it
aborted without the rewrite and sorts correctly with it, session 15); these tests
check the detection, the rewrite and that the rewritten code still runs."""
from __future__ import annotations

import pytest

from tegula.backends.llvm import host_jit

_TRIGGER = """
define void @f(i64 %i, ptr %out) {
  %s = insertelement <4 x i64> poison, i64 %i, i64 0
  %b = shufflevector <4 x i64> %s, <4 x i64> poison, <4 x i32> zeroinitializer
  %a = and <4 x i64> %b, <i64 8, i64 16, i64 32, i64 poison>
  store <4 x i64> %a, ptr %out
  ret void
}
"""


def test_the_crashing_shape_is_recognised_and_nothing_else():
    find = host_jit._AND_WITH_TRAILING_POISON.search
    assert find("  %9461 = and <4 x i64> %9457, <i64 8, i64 16, i64 32, i64 poison>")
    assert find("  %x = and <8 x i32> %y, <i32 1, i32 2, i32 4, i32 8, i32 16, i32 32, i32 64, i32 undef>")
    assert not find("  %1 = and <4 x i64> %2, <i64 8, i64 16, i64 32, i64 64>")
    assert not find("  %1 = and <4 x i64> %2, <i64 poison, i64 16, i64 32, i64 64>")  # not trailing
    assert not find("  %1 = and i64 %2, 8")


def test_a_module_with_the_shape_has_its_poison_lanes_set_to_zero(monkeypatch):
    """Optimized once; the poison lane of the `and` constant becomes 0 (any value is a
    valid refinement of poison) before code generation, on AVX-512 hosts only."""
    calls = []

    def recording(mod, tm, level=2, unroll=True, slp=True):
        calls.append(slp)  # stand-in for what the SLP vectorizer makes: the module holds the shape
    monkeypatch.setattr(host_jit, "optimize", recording)
    monkeypatch.setattr(host_jit, "simd_bytes", lambda: 64)  # as on an AVX-512 host
    tm = host_jit.target_machine(opt=2)
    text = str(host_jit._optimized(_TRIGGER, tm, 2, True))
    assert calls == [True]
    assert "<i64 8, i64 16, i64 32, i64 0>" in text and "poison>" not in text.split("and <4 x i64>")[1]
    monkeypatch.setattr(host_jit, "simd_bytes", lambda: 32)  # AVX2: the combine does not exist
    assert "i64 32, i64 poison>" in str(host_jit._optimized(_TRIGGER, tm, 2, True))


def test_the_fixed_module_compiles_and_computes_the_same_lanes():
    """Code generation of the rewritten module, and the three real lanes unchanged."""
    import ctypes

    tm = host_jit.target_machine(opt=2)
    # (the store with the buffer's 8-byte alignment: a <4 x i64> store assumes 32)
    engine = host_jit.jit(_TRIGGER.replace("ptr %out\n", "ptr %out, align 8\n"), tm)
    out = (ctypes.c_int64 * 4)()
    ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(engine.get_function_address("f"))(
        0b111000, ctypes.addressof(out))
    assert list(out)[:3] == [8, 16, 32]


@pytest.mark.parametrize("level", [0, 1])
def test_lower_levels_are_left_alone(monkeypatch, level):
    calls = []
    monkeypatch.setattr(host_jit, "optimize", lambda mod, tm, lv=2, unroll=True, slp=True: calls.append(slp))
    monkeypatch.setattr(host_jit, "simd_bytes", lambda: 64)
    text = str(host_jit._optimized(_TRIGGER, host_jit.target_machine(opt=level), level, True))
    assert calls == [True] and "i64 32, i64 poison>" in text
