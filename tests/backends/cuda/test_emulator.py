"""The host emulator itself (`backends/cuda/emulator/`): scoped barriers (a warp
collective in warp-divergent code), the capability it lowers for, the host models of
the inline-PTX instructions (predicated and cache-hinted vector loads and stores, fp8
and round-toward-zero conversions, the `.ftz` approximations), and the seam that
tells which instructions have no host model."""
from __future__ import annotations

import ctypes
import re
import sys
from pathlib import Path

import llvmlite.ir as ir
import numpy as np
import pytest
from cuda_kernel_builder import KB

from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.emulator import CAPABILITIES, EmulatedKernel, HostDevice, HostModelMissing
from tegula.backends.cuda.emulator.cta import CtaRunner
from tegula.backends.cuda.emulator.kernel import target_machine
from tegula.backends.cuda.nvvm import NVPTXDevice, shuffle
from tegula.backends.interpreter import execute
from tegula.backends.llvm import host_jit
from tegula.backends.llvm.types import I1, I32, ptr_type
from tegula.ir import attrs as A
from tegula.ir.numpy_ops import FP8_DECODE
from tegula.ir.ops import Op
from tegula.ir.types import F16, F32, I8, PointerType, ScalarType
from tegula.ir.types import I32 as TI32

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interpreter"))
from interp_test_kernels import build_map_kernel  # noqa: E402

sys.path.pop(0)


# ------------------------------------------------------------ scoped barriers

def _divergent_shuffle_module() -> tuple[str, str]:
    """A hand-made kernel through `HostDevice`: odd warps sum a value over their warp
    with a 5-step butterfly of 64-bit shuffles (10 warp collectives), even warps take a
    2-step shuffle-up prefix (2 collectives). With a CTA-wide barrier inside the
    shuffle, the warps would wait for each other and never finish."""
    dev = HostDevice()
    module = ir.Module("divergent")
    module.triple = dev.triple
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr_type(0)] + dev.extra_params()), "divergent")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    dev.begin(fn, b, list(fn.args[1:]))
    tid = dev.sreg(b, "tid.x")
    warp = b.lshr(tid, ir.Constant(I32, 5))
    out = b.gep(fn.args[0], [tid], source_etype=ir.IntType(64))
    cta = b.zext(dev.sreg(b, "ctaid.x"), ir.IntType(64))
    with b.if_else(b.trunc(warp, I1)) as (odd, even):
        with odd:
            v = b.add(b.mul(b.zext(tid, ir.IntType(64)), ir.Constant(ir.IntType(64), 3 << 32)), cta)
            for k in (16, 8, 4, 2, 1):
                v = b.add(v, shuffle(dev, b, "bfly", v, ir.Constant(I32, k)))
            b.store(v, out)
        with even:
            v = b.add(b.zext(tid, ir.IntType(64)), cta)
            for k in (1, 2):
                v = b.add(v, shuffle(dev, b, "up", v, ir.Constant(I32, k)))
            b.store(v, out)
    b.ret_void()
    dev.annotate(module, fn, 128)
    return str(module), fn.name


def _expected_divergent(num_warps: int, cta: int) -> np.ndarray:
    out = np.zeros(32 * num_warps, np.uint64)
    for w in range(num_warps):
        tids = np.arange(32 * w, 32 * w + 32, dtype=np.uint64)
        if w % 2:
            out[tids] = np.sum(tids * np.uint64(3 << 32) + np.uint64(cta), dtype=np.uint64)
        else:
            v = tids + np.uint64(cta)
            for k in (1, 2):  # shfl.up: lanes below k read their own value
                v = v + np.concatenate([v[:k], v[:-k]])
            out[tids] = v
    return out


@pytest.mark.parametrize("num_warps", [2, 4, 8])
def test_shuffles_in_warp_divergent_code_complete(num_warps):
    llir, name = _divergent_shuffle_module()
    engine = host_jit.jit(llir, target_machine(), 2)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)(
        engine.get_function_address(name))
    runner = CtaRunner(fn, num_warps, smem_bytes=0)
    for grid in (1, 3):
        out = np.zeros(32 * num_warps, np.uint64)
        runner.run((grid, 1, 1), [out.ctypes.data], timeout=60)
        # every CTA writes the whole array, the last one (ctaid.x = grid - 1) last
        np.testing.assert_array_equal(out, _expected_divergent(num_warps, grid - 1))


# ------------------------------------------------------------ capability and PTX models

def test_capability_is_checked():
    kernel = build_map_kernel(Op.ADD, [F32, F32], F32)
    with pytest.raises(ValueError, match="capability 80, 89 or 90, not 75"):
        EmulatedKernel(kernel, 1, capability=75)


def _run_both(kernel, args, capability, num_warps=1, grid=(1, 1, 1)):
    """(emulated outputs, interpreter outputs) of `kernel` on copies of `args`."""
    emu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ek = EmulatedKernel(kernel, num_warps, capability=capability)
    assert "asm" not in ek.llir  # every inline-PTX path ran as a host model
    ek.run(grid, emu)
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with np.errstate(all="ignore"):
        execute(kernel, grid, ref)
    return emu, ref


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e6, -1e6, 448.0, 464.0, 57344.0, 61440.0,
                    2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -16, 2.0 ** -17, -2.0 ** -18, 1e-30])


@pytest.mark.parametrize("capability", CAPABILITIES)
@pytest.mark.parametrize("fmt", ["f8e4m3", "f8e5m2"])
def test_fp8_round_trip_matches_the_interpreter(capability, fmt):
    """sm_90 runs `cvt.rn.satfinite` / `cvt.rn.f16x2` (their host models), sm_80 the
    portable conversion: both round to nearest even and saturate, as the interpreter."""
    t = ScalarType(fmt)
    rng = np.random.default_rng()
    x = (rng.standard_normal(128) * np.exp2(rng.integers(-20, 18, 128))).astype(np.float32)
    x[:len(SPECIAL)] = SPECIAL
    to_fp8 = build_map_kernel(Op.CAST, [F32], t, attrs=A.CastAttrs())
    (_, got), (_, want) = _run_both(to_fp8, [x, np.zeros(128, np.uint8)], capability)
    np.testing.assert_array_equal(got, want)
    codes = np.arange(256, dtype=np.uint8)[:128]
    for dst, dt in ((F32, np.float32), (F16, np.float16)):
        for half in (codes, codes + 128):
            back = build_map_kernel(Op.CAST, [t], dst, attrs=A.CastAttrs())
            (_, got), (_, want) = _run_both(back, [half.astype(np.uint8), np.zeros(128, dt)], capability)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(FP8_DECODE[fmt][half]))
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dst", ["f16", "bf16"])
def test_round_toward_zero_conversion(dst):
    rng = np.random.default_rng()
    x = (rng.standard_normal(128) * np.exp2(rng.integers(-30, 30, 128))).astype(np.float32)
    x[:len(SPECIAL)] = SPECIAL
    k = KB("rtz", [("x", PointerType(F32), 16), ("y", PointerType(ScalarType(dst)), 16)])
    idx = k.arange(128)
    k.store(k.ptrs(k.a["y"], idx), k.cast(k.load(k.ptrs(k.a["x"], idx)), ScalarType(dst), "rtz"))
    kernel = k.done()
    (_, got), (_, want) = _run_both(kernel, [x, np.zeros(128, np.uint16)], 90)
    np.testing.assert_array_equal(got, want)


def test_ftz_square_roots_flush_denormal_inputs():
    x = np.array([4.0, 2.0, 1e-40, -1e-40, 0.0, -0.0, 2.0 ** -126, np.inf, -1.0] * 15 + [9.0], np.float32)[:128]
    for op, expect in ((Op.SQRT, np.sqrt), (Op.RSQRT, lambda v: 1 / np.sqrt(v))):
        emu = [x.copy(), np.zeros(128, np.float32)]
        EmulatedKernel(build_map_kernel(op, [F32], F32), 1, capability=90).run((1, 1, 1), emu)
        flushed = np.where(np.abs(x) < 2.0 ** -126, np.copysign(0.0, x), x).astype(np.float32)
        with np.errstate(all="ignore"):
            want = expect(flushed).astype(np.float32)
        np.testing.assert_array_equal(emu[1], want)


@pytest.mark.parametrize("capability", CAPABILITIES)
@pytest.mark.parametrize("elem,cache,volatile", ids=str, argvalues=[
    (F32, ".cg", False), (F16, "", True), (I8, ".cs", False), (I8, "", True), (F16, ".ca", False)])
def test_predicated_vector_loads_and_stores(capability, elem, cache, volatile):
    """Masked vector accesses with `other`, cache hints and `volatile` (inline PTX on the
    GPU: `@p ld.global.v4.b32` with the other words moved in first) over a length that
    is not a multiple of the block, with the host models of `ld_global`/`st_global`."""
    dt = {"f32": np.float32, "f16": np.float16, "i8": np.int8}[elem.name]
    # n divisible by 16 (as specialized) keeps the mask constant over a vector, so the
    # masked accesses are vectorized; 1008 is not a multiple of the block
    n, block = 1008, 256
    k = KB("masked_copy", [("x", PointerType(elem), 16), ("y", PointerType(elem), 16), ("n", TI32, 16)])
    offs = k.op(Op.ADD, k.splat(k.op(Op.MUL, k.pid(), k.const(block, TI32)), (block,)), k.arange(block))
    mask = k.op(Op.LT, offs, k.splat(k.a["n"], (block,)))
    other = k.splat(k.const(7, elem), (block,))
    v = k.load(k.ptrs(k.a["x"], offs), mask, other, cache_modifier=cache, volatile=volatile)
    k.step()
    k.b.create(Op.STORE, [k.ptrs(k.a["y"], offs), v, mask],
               attrs=A.StoreAttrs(True, cache_modifier=cache.replace(".ca", ".wb")))
    # the other value reaches memory where the mask is false: a second, shifted store
    shifted = k.op(Op.ADD, offs, k.splat(k.const(1024, TI32), (block,)))
    k.store(k.ptrs(k.a["y"], shifted), v, k.op(Op.LT, shifted, k.splat(k.const(2 * 1024, TI32), (block,))))
    kernel = k.done()
    rng = np.random.default_rng()
    x = (rng.standard_normal(1024) * 20).astype(dt)
    grid = ((n + block - 1) // block, 1, 1)
    emu, ref = _run_both(kernel, [x, np.zeros(2048, dt), n], capability, num_warps=2, grid=grid)
    np.testing.assert_array_equal(emu[1], ref[1])
    assert (emu[1][1024 + n:] == 7).all() and (emu[1][:n] == x[:n]).all()
    # what the GPU runs for it: one predicated access per thread and word group
    ptx = compile_kernel(kernel, {"num_warps": 2}, capability)[0]["ptx"]
    vec = ".v2.b32" if elem is F16 else ".v4.b32" if elem is F32 else ".b32"
    load = r"ld\.volatile\.global" if volatile else r"ld\.global"
    assert re.search(r"@%p\d+ " + load + r"\S*" + re.escape(vec), ptx), ptx
    assert re.search(r"@%p\d+ st\.global\S*" + re.escape(vec), ptx), ptx


# ------------------------------------------------------------ the seam

def test_every_instruction_has_a_host_model():
    missing = [n for n in NVPTXDevice.INSTRUCTIONS if getattr(HostDevice, n).__qualname__.startswith("_missing")]
    assert missing == [], f"instructions without a host model: {missing}"
    for name in NVPTXDevice.INSTRUCTIONS:
        assert getattr(HostDevice, name) is not getattr(NVPTXDevice, name), name


def test_an_instruction_without_a_model_fails_at_lowering_by_name():
    from tegula.backends.cuda.emulator.host_device import _missing
    with pytest.raises(HostModelMissing, match="no model of the 'wgmma' instruction"):
        _missing("wgmma")(HostDevice(), None)
