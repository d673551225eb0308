"""`register_offsets`: integer registers kept as a shared part plus a constant. The
rewrites are identities of modular arithmetic (checked by running the emitted LLVM on
the host against Python's wrapped integers, wrap-around included), and they give an
index computed in a loop from an arange (Inductor's matmul template) one address base
per thread plus constants, where the plain lowering kept a 64-bit address per row."""
from __future__ import annotations

import ctypes
import random
import re

import llvmlite.ir as ir
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.register_offsets import RegisterOffsets
from tegula.backends.llvm.host_jit import jit, target_machine
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir
from tegula.runtime.source import ASTSource

# each step: (op, constant operand or None for the second input, which side the split value is on)
_CHAINS = [
    [(Op.ADD, None, "left"), (Op.MUL, 4096, "left"), (Op.ADD, None, "right")],
    [(Op.SUB, None, "left"), (Op.MUL, -3, "right"), (Op.SUB, None, "right")],
    [(Op.ADD, 2**31 - 5, "left"), (Op.MUL, 65537, "left"), (Op.SUB, 7, "left")],
]


def _build(width: int, c: int, chain) -> tuple[str, list]:
    """A function f(base, y) that starts from `base + c` (split) and applies `chain`,
    once through RegisterOffsets and once plainly; returns both results' difference."""
    t = ir.IntType(width)
    mod = ir.Module(name="offsets")
    fn = ir.Function(mod, ir.FunctionType(t, [t, t, t]), name="f")
    base, y, plain_start = fn.args
    b = ir.IRBuilder(fn.append_basic_block())
    offsets = RegisterOffsets()
    split = offsets.offset(b, base, c)
    plain = plain_start
    ops = {Op.ADD: b.add, Op.SUB: b.sub, Op.MUL: b.mul}
    for op, k, side in chain:
        other = y if k is None else ir.Constant(t, k & ((1 << width) - 1))
        args = [split, other] if side == "left" else [other, split]
        got = offsets.lower(b, op, args)
        assert got is not None
        split = got
        plain = ops[op](*([plain, other] if side == "left" else [other, plain]))
    b.ret(b.sub(split, plain))
    return str(mod), chain


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("chain", range(len(_CHAINS)))
def test_reassociated_registers_are_the_plain_values_bit_for_bit(width, chain):
    rng = random.Random(width * 10 + chain)
    for c in (8, 56, -1, 2**(width - 1) - 1):
        text, _ = _build(width, c, _CHAINS[chain])
        engine = jit(text, target_machine())
        ctype = ctypes.c_int64 if width == 64 else ctypes.c_int32
        f = ctypes.CFUNCTYPE(ctype, ctype, ctype, ctype)(engine.get_function_address("f"))
        for _ in range(20):
            base, y = rng.getrandbits(width), rng.getrandbits(width)
            start = (base + c) & ((1 << width) - 1)
            as_signed = lambda v: v - (1 << width) if v >= 1 << (width - 1) else v  # noqa: E731
            assert f(as_signed(base), as_signed(y), as_signed(start)) == 0


def test_products_with_a_non_constant_are_left_to_the_plain_lowering():
    t = ir.IntType(32)
    fn = ir.Function(ir.Module(), ir.FunctionType(t, [t, t]), name="g")
    b = ir.IRBuilder(fn.append_basic_block())
    offsets = RegisterOffsets()
    split = offsets.offset(b, fn.args[0], 8)
    assert offsets.lower(b, Op.MUL, [split, fn.args[1]]) is None
    assert offsets.lower(b, Op.AND, [split, fn.args[1]]) is None
    assert offsets.lower(b, Op.ADD, [fn.args[0], fn.args[1]]) is None  # nothing split


@tegula.jit
def template_mm(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Inductor's mm template, shape 512³ baked in: indices recomputed in the loop."""
    pid = tl.program_id(0)
    rm = (pid // (512 // BN)) * BM + tl.arange(0, BM)
    rn = (pid % (512 // BN)) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, 512 // BK):
        a = tl.load(a_ptr + (rm[:, None] * 512 + (offs_k[None, :] + k * BK)))
        b = tl.load(b_ptr + ((offs_k[:, None] + k * BK) * 512 + rn[None, :]))
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * 512 + rn[None, :], acc)


@pytest.mark.parametrize("capability", [80, 90])
def test_an_index_recomputed_in_the_loop_addresses_rows_from_one_base(capability, monkeypatch):
    src = ASTSource(template_mm, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "BM": "constexpr",
                                  "BN": "constexpr", "BK": "constexpr"},
                    {"BM": 128, "BN": 128, "BK": 64}, {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16})
    kernel = optimized_ir(src)

    def rows_off_one_base(on: bool) -> int:
        monkeypatch.setenv("TEGULA_REGISTER_OFFSETS", "1" if on else "0")
        llir = compile_kernel(kernel, {"num_warps": 4, "num_stages": 3}, capability)[0]["llir"]
        # b's rows, 8 apart: one address, then the others at constant byte offsets from it
        return len(re.findall(r"getelementptr i8, ptr addrspace\(1\) %[\w.]+, i64 \d+", llir))

    assert rows_off_one_base(True) > rows_off_one_base(False)
