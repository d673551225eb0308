"""`backends/llvm/host_jit`'s guard against an LLVM code-generator crash on AVX-512
hosts: a module whose optimized form holds a vector `and` with a trailing-poison
constant (what LLVM 22's X86 combineAVX512SetCCToKMOV asserts on, aborting the
process) is optimized again without the SLP vectorizer that made it. The crash itself
needs the right SLP output (Inductor's sort_with_index over 64 values on this session's
AVX-512 host); these tests check the detection and the decision."""
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


def test_a_module_with_the_shape_is_optimized_again_without_slp(monkeypatch):
    calls = []
    real = host_jit.optimize

    def recording(mod, tm, level=2, unroll=True, slp=True):
        calls.append(slp)
        # stand-in for what the SLP vectorizer makes: the module already holds the shape
        return None if slp else real(mod, tm, level, unroll, slp)

    monkeypatch.setattr(host_jit, "optimize", recording)
    monkeypatch.setattr(host_jit, "simd_bytes", lambda: 64)  # as on an AVX-512 host
    tm = host_jit.target_machine(opt=2)
    host_jit._optimized(_TRIGGER, tm, 2, True)
    assert calls == [True, False]
    calls.clear()
    host_jit._optimized(_TRIGGER.replace("i64 poison>", "i64 64>"), tm, 2, True)
    assert calls == [True]
    calls.clear()
    monkeypatch.setattr(host_jit, "simd_bytes", lambda: 32)  # AVX2: the combine does not exist
    host_jit._optimized(_TRIGGER, tm, 2, True)
    assert calls == [True]


@pytest.mark.parametrize("level", [0, 1])
def test_lower_levels_never_reoptimize(monkeypatch, level):
    calls = []
    monkeypatch.setattr(host_jit, "optimize", lambda mod, tm, lv=2, unroll=True, slp=True: calls.append(slp))
    monkeypatch.setattr(host_jit, "simd_bytes", lambda: 64)
    host_jit._optimized(_TRIGGER, host_jit.target_machine(opt=level), level, True)
    assert calls == [True]
