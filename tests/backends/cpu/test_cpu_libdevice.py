"""The CPU backend's explicitly rounded libdevice arithmetic and conversions on the
operands where the rounding is delicate — overflow, exact zeros, subnormal results,
exact results, integers near the ends of their range — bitwise against the interpreter
(tests/numerics/test_libdevice.py covers every symbol on random operands)."""
import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.language.extra import libdevice


@tegula.jit
def binary(x, y, o, n, OP: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, B)
    m = offs < n
    a, b = tl.load(x + offs, mask=m), tl.load(y + offs, mask=m)
    for k in tl.static_range(4):
        if OP == "add":
            r = (libdevice.add_rn, libdevice.add_rz, libdevice.add_rd, libdevice.add_ru)[k](a, b)
        elif OP == "mul":
            r = (libdevice.mul_rn, libdevice.mul_rz, libdevice.mul_rd, libdevice.mul_ru)[k](a, b)
        elif OP == "div":
            r = (libdevice.div_rn, libdevice.div_rz, libdevice.div_rd, libdevice.div_ru)[k](a, b)
        else:
            r = (libdevice.fma_rn, libdevice.fma_rz, libdevice.fma_rd, libdevice.fma_ru)[k](a, b, a)
        tl.store(o + k * B + offs, r, mask=m)


def _edge_operands(dt):
    f = np.finfo(dt)
    big, tiny, sub = f.max, f.tiny, dt(f.smallest_subnormal)
    a = [big, big, -big, 1.0, -0.0, -3.0, tiny, -tiny, sub, 1.0, 3.0, 2.0, 0.1, -0.1, 1e30, big / 2]
    b = [big, -big / 2, -big, -1.0, -0.0, 0.0, tiny, tiny, 0.5, 3.0, 7.0, 0.5, 1e-30, 3.0, 1e30, 3.0]
    return np.array(a, dt), np.array(b, dt)


@pytest.mark.parametrize("op", ["add", "mul", "div", "fma"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_directed_rounding_edge_cases(cpu, monkeypatch, op, dt):
    x, y = _edge_operands(dt)
    if op == "fma" and dt is np.float64:
        x, y = x[:6], y[:6]  # not products below 2^-969 (libdevice_rounded's documented gap)
    rng = np.random.default_rng()
    x = np.concatenate([x, rng.standard_normal(16).astype(dt)])
    y = np.concatenate([y, rng.standard_normal(16).astype(dt) * dt(1e-8)])

    def launch():
        o = np.zeros(4 * 32, dt)
        with np.errstate(all="ignore"):
            binary[(1,)](x, y, o, x.size, OP=op, B=32)
        return o
    got = launch()
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    ref = launch()
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


@tegula.jit
def conversions(d, i, of, od, oi, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    m = offs < n
    v, k = tl.load(d + offs, mask=m), tl.load(i + offs, mask=m)
    tl.store(of + offs, libdevice.double2float_rd(v), mask=m)
    tl.store(of + B + offs, libdevice.double2float_ru(v), mask=m)
    tl.store(of + 2 * B + offs, libdevice.double2float_rz(v), mask=m)
    tl.store(of + 3 * B + offs, libdevice.ll2float_rd(k), mask=m)
    tl.store(of + 4 * B + offs, libdevice.ll2float_ru(k), mask=m)
    tl.store(od + offs, libdevice.ll2double_rd(k), mask=m)
    tl.store(od + B + offs, libdevice.ll2double_ru(k), mask=m)
    tl.store(od + 2 * B + offs, libdevice.ull2double_ru(k.to(tl.uint64, bitcast=True)), mask=m)
    tl.store(oi + offs, libdevice.double2ll_rn(v), mask=m)
    tl.store(oi + B + offs, libdevice.double2ll_rd(v * 1e10), mask=m)


def test_conversions_at_the_range_ends(cpu, monkeypatch):
    big = float(np.finfo(np.float32).max)
    d = np.array([big * (1 + 2**-25), big * (1 + 2**-23), -big * 1.5, 1e-50, -1e-50, 0.5, 1.5, 2.5, -2.5,
                  1 + 2**-30, np.nan, np.inf, -np.inf, 1e300, -0.0, 2.0**63], np.float64)
    i = np.array([2**63 - 1, -2**63, 2**24 + 1, -(2**24 + 1), 2**53 + 1, -(2**53 + 1), 0, -1, 1, 2**62 + 1,
                  3, -7, 2**40 + 3, 2**63 - 2**10, -2**60 - 1, 5], np.int64)

    def launch():
        of, od, oi = np.zeros(5 * 16, np.float32), np.zeros(3 * 16, np.float64), np.zeros(2 * 16, np.int64)
        with np.errstate(all="ignore"):
            conversions[(1,)](d, i, of, od, oi, 16, B=16)
        return of, od, oi
    got = launch()
    monkeypatch.setenv("TEGULA_INTERPRET", "1")
    ref = launch()
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8))
