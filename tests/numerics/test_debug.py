"""device_print format, device_assert, assume (debug only), and located errors for
unexpected failures.

The printed lines are the same on every backend (Triton's format); the interpreter
prints them in row-major order, the GPU in no particular order, so compiled backends
are compared as sorted lines. Output is captured at the file-descriptor level: the GPU
and the emulator print through C's stdout. Assertions are checked by the compiled
backends in checked (debug) mode only (the frontend emits `device_assert` only then)."""
from __future__ import annotations

import numpy as np
import pytest
from interp_test_kernels import SRC, load, loc, ptrs, row_major_offsets, tile
from numerics_backends import is_compiled, run, runs_concurrently

from tegula.errors import DeviceAssertionError, KernelRuntimeError
from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.ops import Op
from tegula.ir.types import BF16, F32, I32, U8, PointerType
from tegula.ir.verifier import verify


def print_kernel(shape, elem, prefix=" x: ", hex_=False, extra_scalar=False):
    k = new_kernel("printer", [PointerType(elem)], ["x_ptr"])
    (x,) = k.args
    b = Builder(k.body)
    v = load(b, ptrs(b, x, row_major_offsets(b, shape)))
    ops = [v]
    if extra_scalar:
        ops.append(b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(0)))
    b.create(Op.DEVICE_PRINT, ops, A.PrintAttrs(prefix, hex_))
    b.create(Op.RETURN, [])
    verify(k)
    return k


def printed(capfd) -> list[str]:
    """The lines printed: in the interpreter's order, sorted where programs run
    concurrently."""
    lines = capfd.readouterr().out.splitlines()
    return sorted(lines) if runs_concurrently() else lines


def test_device_print_one_line_per_element(capfd):
    x = np.random.default_rng().integers(-50, 50, 16).astype(np.int32)
    run(print_kernel((16,), I32), (2,), x)
    expected = [f"pid ({p}, 0, 0) idx ({i:2d}) x: {x[i]}" for p in range(2) for i in range(16)]
    assert printed(capfd) == (sorted(expected) if runs_concurrently() else expected)


def test_device_print_2d_floats_and_scalar_operand(capfd):
    x = np.random.default_rng().standard_normal(8 * 16).astype(np.float32)
    run(print_kernel((8, 16), F32, prefix=" v: ", extra_scalar=True), (1,), x)
    lines = printed(capfd)
    expected = [f"pid (0, 0, 0) idx ({i}, {j:2d}) v: (operand 0) {x[i * 16 + j]:f}"
                for i in range(8) for j in range(16)] + ["pid (0, 0, 0) idx () v: (operand 1) 0"]
    assert lines == (sorted(expected) if runs_concurrently() else expected)


def test_device_print_hex(capfd):
    x = np.array([0x3F80, 0xC000, 0x0001, 0x7F7F] * 4, np.uint16)
    run(print_kernel((16,), BF16, prefix=" h: ", hex_=True), (1,), x)
    expected = [f"pid (0, 0, 0) idx ({i:2d}) h: 0x{v:04x}" for i, v in enumerate(x)]
    assert printed(capfd) == (sorted(expected) if runs_concurrently() else expected)
    u = np.random.default_rng().integers(0, 256, 16).astype(np.uint8)
    run(print_kernel((16,), U8, prefix=" u: ", hex_=True), (1,), u)
    expected = [f"pid (0, 0, 0) idx ({i:2d}) u: 0x{v:02x}" for i, v in enumerate(u)]
    assert printed(capfd) == (sorted(expected) if runs_concurrently() else expected)


def test_device_print_without_operands(capfd):
    """One line per program (not per GPU thread)."""
    k = new_kernel("hello", [], [])
    b = Builder(k.body)
    b.create(Op.DEVICE_PRINT, [], A.PrintAttrs(" hello"))
    b.create(Op.RETURN, [])
    run(k, (2, 1, 2))
    expected = ["pid (0, 0, 0) hello", "pid (1, 0, 0) hello", "pid (0, 0, 1) hello", "pid (1, 0, 1) hello"]
    assert printed(capfd) == (sorted(expected) if runs_concurrently() else expected)


def assert_kernel():
    """device_assert(x < limit) over 64 elements."""
    k = new_kernel("checker", [PointerType(I32), I32], ["x_ptr", "limit"])
    x, limit = k.args
    b = Builder(k.body)
    v = load(b, ptrs(b, x, b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 64))))
    b.loc = loc(70, 8)
    b.create(Op.DEVICE_ASSERT, [b.op1(Op.LT, v, b.splat(limit, (64,)))], A.AssertAttrs("x must be < limit"))
    b.create(Op.RETURN, [])
    verify(k)
    return k


def test_device_assert_passes_silently():
    x = np.random.default_rng().integers(0, 10, 64).astype(np.int32)
    run(assert_kernel(), (3,), x, 10, debug=is_compiled())


def test_device_assert_names_message_pid_line_and_first_failing_index():
    x = np.random.default_rng().integers(0, 10, 64).astype(np.int32)
    x[37], x[50] = 99, 123
    with pytest.raises(DeviceAssertionError) as info:
        run(assert_kernel(), (1, 2), x, 10, debug=is_compiled())
    err = info.value
    assert err.loc.line == 70 and err.loc.file == SRC
    text = str(err)
    assert "x must be < limit" in text
    assert isinstance(err, AssertionError)
    if is_compiled():
        assert err.pid in ((0, 0, 0), (0, 1, 0))  # both programs fail; either is reported
        return
    assert err.pid == (0, 0, 0)
    assert "index (37,)" in text and "2 of 64" in text


def assume_kernel():
    k = new_kernel("assumer", [I32], ["n"])
    (n,) = k.args
    b = Builder(k.body)
    b.loc = loc(80)
    b.create(Op.ASSUME, [b.op1(Op.GT, n, b.constant(0, I32))])
    b.create(Op.RETURN, [])
    verify(k)
    return k


def test_assume_is_checked_only_in_debug_mode():
    run(assume_kernel(), (1,), -3)
    with pytest.raises(DeviceAssertionError, match="assumption"):
        run(assume_kernel(), (1,), -3, debug=True)
    run(assume_kernel(), (1,), 3, debug=True)


def test_hint_and_debug_barrier_pass_through():
    k = new_kernel("hinted", [PointerType(F32), PointerType(F32)], ["x_ptr", "out_ptr"])
    x, out = k.args
    b = Builder(k.body)
    iota = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 32))
    offs = b.op1(Op.HINT, iota, attrs=A.HintAttrs("multiple_of", (16,)))
    v = load(b, ptrs(b, x, offs))
    b.create(Op.DEBUG_BARRIER, [])
    b.create(Op.STORE, [ptrs(b, out, offs), v], A.StoreAttrs())
    b.create(Op.RETURN, [])
    verify(k)
    src = np.random.default_rng().standard_normal(32).astype(np.float32)
    dst = np.zeros(32, np.float32)
    run(k, (1,), src, dst)
    np.testing.assert_array_equal(dst, src)


@pytest.mark.backends("interpreter", reason="IR the verifier rejects (a dot of mismatched shapes): the subject "
                      "is the interpreter's located runtime error; compilers reject such IR before running it")
def test_unexpected_failure_is_located():
    """IR the verifier would reject (a dot of mismatched shapes) still fails at the
    instruction's line with the program id, not with a bare numpy traceback."""
    k = new_kernel("bad", [], [])
    b = Builder(k.body)
    b.loc = loc(90)
    a = b.constant(1.0, tile(F32, 16, 32))
    c = b.constant(0.0, tile(F32, 16, 16))
    b.create(Op.DOT, [a, a, c], A.DotAttrs())
    b.create(Op.RETURN, [])
    with pytest.raises(KernelRuntimeError) as info:
        run(k, (1,))
    assert info.value.loc.line == 90 and "dot" in str(info.value) and info.value.pid == (0, 0, 0)
