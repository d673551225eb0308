"""What the CUDA backend's code for memory-bound kernels looks like (PTX for sm_90, no GPU
needed): Triton's math sequences (`tl.exp` as ex2.approx of x·log2e, fused multiply-
adds under `enable_fp_fusion`), `.reqntid`, one compare per vector for a mask that is
constant over it, and reductions with one barrier each (none between the readers of one
reduction's scratch and the writers of the next). Results of the same lowering are
checked on the host emulator elsewhere (test_cuda_emulated); the kernels here also run
there, against numpy, so the barrier savings are exercised by real threads."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.layouts import blocked
from tegula.backends.cuda.lower_elementwise import constant_groups
from tegula.compiler import ASTSource


def _benchmark_kernels():
    """benchmarks/kernels.py, the source the GPU benchmark times against Triton, loaded
    with `triton` resolving to tegula (benchmarks/load.py)."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "load.py"
    spec = importlib.util.spec_from_file_location("tegula_bench_load", path)
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    return load.load_tegula_kernels()


_BENCH = _benchmark_kernels()
softmax_kernel, layernorm_kernel = _BENCH.softmax_kernel, _BENCH.layernorm_kernel


@tegula.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs) * tl.load(y_ptr + offs) + tl.load(z_ptr + offs))


@tegula.jit
def convert_then_reduce_kernel(x_ptr, o_ptr, R: tl.constexpr, C: tl.constexpr):
    """A transpose (through shared memory) followed by a reduction: the reduction's
    scratch overlaps the conversion's, so a barrier must separate them."""
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * C + c)
    t = tl.trans(x)
    tl.store(o_ptr + tl.arange(0, C), tl.sum(t, axis=1))
    tl.store(o_ptr + C + tl.arange(0, R), tl.max(t, axis=0))


SOFTMAX_SIG = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
               "n_cols": "i32", "BLOCK": "constexpr"}
LAYERNORM_SIG = {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16", "stride": "i32",
                 "N": "i32", "eps": "fp32", "BLOCK": "constexpr"}


def _compile(fn, sig, constexprs, attrs=None, **options):
    src = ASTSource(fn, sig, constexprs, attrs)
    return tegula.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def _body(ptx: str) -> str:
    return ptx[ptx.index(".entry"):]


def _softmax_ptx(**options):
    return _body(_compile(softmax_kernel, SOFTMAX_SIG, {"BLOCK": 1024}, {0: 16, 1: 16},
                          num_warps=4, **options).asm["ptx"])


def _layernorm_ptx(block=4096, num_warps=16):
    k = _compile(layernorm_kernel, LAYERNORM_SIG, {"BLOCK": block}, {i: 16 for i in range(6)},
                 num_warps=num_warps)
    return _body(k.asm["ptx"])


def test_exp_is_ex2_approx_of_x_times_log2e_as_in_triton():
    ptx = _softmax_ptx()
    assert ptx.count("ex2.approx.f32") == 8  # 1024 elements / 128 threads
    assert "0f3FB8AA3B" in ptx  # log2(e) rounded to f32
    assert "ex2.approx.ftz" not in ptx  # denormal results kept, as Triton's tl.exp


def test_kernel_declares_its_exact_block_size():
    assert ".reqntid 128" in _softmax_ptx()


def test_two_reductions_take_two_barriers():
    """max then sum over 4 warps: one barrier per reduction, none between the readers
    of the first scratch and the writers of the second (they use other bytes)."""
    ptx = _softmax_ptx()
    assert ptx.count("bar.sync") == 2
    assert ptx.count("shfl.sync.bfly") == 10  # 5 lane bits per reduction
    # every thread reads the 4 warps' partials in one vector load
    assert ptx.count("ld.shared.v4.b32") == 2


def test_layernorm_mask_is_one_compare_per_vector_and_fma_is_used():
    ptx = _layernorm_ptx()
    # 8 fp16 per thread in one 16-byte access: the mask `offs < N` (N % 16 == 0) is
    # constant over them, so it is one compare, used by the loads, select and store
    assert len(re.findall(r"setp\.lt\.s32", ptx)) == 1
    assert ptx.count("ld.global.v4.b32") == 3 and ptx.count("st.global.v4.b32") == 1
    assert "fma.rn.f32" in ptx
    assert ptx.count("bar.sync") == 2


@pytest.mark.parametrize("fusion, fused", [(True, True), (False, False)])
def test_enable_fp_fusion_controls_fma_contraction(fusion, fused):
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "o_ptr": "*fp32", "BLOCK": "constexpr"}
    ptx = _body(_compile(fma_kernel, sig, {"BLOCK": 128}, num_warps=4, enable_fp_fusion=fusion).asm["ptx"])
    assert ("fma.rn.f32" in ptx) == fused
    if not fused:  # without fusion each op rounds on its own, and ptxas may not fuse them
        assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx


@pytest.mark.parametrize("knob, fused", [("0", False), ("1", True)])
def test_default_fp_fusion_knob_sets_the_default(knob, fused, monkeypatch):
    """TRITON_DEFAULT_FP_FUSION is the default of enable_fp_fusion (Triton's
    knobs.language.default_fp_fusion); an explicit option still wins."""
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", knob)
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "o_ptr": "*fp32", "BLOCK": "constexpr"}
    src = ASTSource(fma_kernel, sig, {"BLOCK": 128})
    ptx = _body(tegula.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"])
    assert ("fma.rn.f32" in ptx) == fused
    ptx = _body(tegula.compile(src, target=GPUTarget("cuda", 90, 32), options={"enable_fp_fusion": not fused})
                .asm["ptx"])
    assert ("fma.rn.f32" in ptx) == (not fused)


class _CountingPlacement:
    """The allocation/barrier passes' bookkeeping (`shared_memory`) on its own: places
    scratch uses one after the other and counts the barriers (before a use that must
    wait for the latest one's readers, and the use's own between write and read)."""

    def __init__(self):
        from tegula.backends.cuda.shared_memory import _Allocate
        self.alloc = _Allocate(None)
        self.barriers = 0

    @property
    def smem_bytes(self):
        return self.alloc.total

    def use(self, nbytes, small=False):
        from tegula.backends.cuda.shared_memory import ScratchNeed
        lo = self.alloc.place(ScratchNeed(nbytes, after_latest=small))
        self.barriers += int(self.alloc.latest.use(lo, lo + nbytes)) + 1
        self.alloc.total = max(self.alloc.total, lo + nbytes)
        return lo

    def push_scope(self):
        self.alloc.latest.enter()

    def pop_scope(self):
        self.alloc.latest.leave()


def test_scratch_uses_avoid_barriers_only_when_safe():
    c = _CountingPlacement()
    assert c.use(16, small=True) == 0 and c.barriers == 1       # first use: no wait before
    assert c.use(16, small=True) == 16 and c.barriers == 2      # next one moves past it
    assert c.use(16, small=True) == 0 and c.barriers == 3       # and back (older readers done)
    c.use(4096)                                                 # a big one overlaps: waits
    assert c.barriers == 5
    assert c.use(64, small=True) == 0 and c.barriers == 7       # past it would grow the
    assert c.smem_bytes == 4096                              # scratch beyond 1 KB: waits
    assert c.use(64, small=True) == 64 and c.barriers == 8      # within what is reserved
    c.push_scope()                                           # a loop body or a branch:
    c.use(16, small=True)                                       # the latest use is unknown
    assert c.barriers == 10
    c.use(16, small=True)
    assert c.barriers == 11
    c.pop_scope()                                            # it may not have run
    c.use(16, small=True)
    assert c.barriers == 13
    c.push_scope()                                           # a region without scratch
    c.pop_scope()                                            # leaves the state as it was
    assert c.use(16, small=True) != 0 and c.barriers == 14


def test_a_loop_body_waits_before_its_first_scratch_use():
    c = _CountingPlacement()
    c.alloc.latest.loop_depth = 1
    c.use(16, small=True)
    assert c.barriers == 2  # the previous iteration's readers


def test_constant_groups_follow_the_values_constancy():
    lay = blocked((4096,), (8,), (32,), (16,), (0,))
    assert constant_groups(lay, (8,)) == [0] * 8
    assert constant_groups(lay, (4,)) == [0, 0, 0, 0, 4, 4, 4, 4]
    assert constant_groups(lay, (1,)) == list(range(8))
    assert constant_groups(lay, None) == list(range(8))
    # registers of a larger tile repeat the CTA tile: blocks of 8 do not span repeats
    big = blocked((8192,), (8,), (32,), (16,), (0,))
    assert constant_groups(big, (8,)) == [0] * 8 + [8] * 8
    # a 2-D value constant along rows only: registers in one row share a value
    lay2 = blocked((4, 64), (2, 4), (4, 8), (1, 1), (1, 0))
    groups = constant_groups(lay2, (1, 64))
    for r, g in enumerate(groups):
        assert lay2.reg_element(r) >> 6 == lay2.reg_element(g) >> 6


# ---------------------------------------------------------------- run on the emulator

@pytest.fixture
def emulated(monkeypatch):
    """Host-array launches run on the CUDA lowering's host emulator (real threads,
    real barriers), so a missing barrier between scratch uses can show."""
    from emulated_backend import EmulatedCudaBackend

    from tegula.runtime import backend_registry
    original = backend_registry._FACTORIES["cpu"]
    backend_registry.register_backend("cpu", EmulatedCudaBackend)
    yield EmulatedCudaBackend
    backend_registry.register_backend("cpu", original)


def test_softmax_and_layernorm_on_the_emulator(emulated):
    rng = np.random.default_rng(0)
    rows, cols = 3, 1000
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros_like(x)
    softmax_kernel[(rows,)](out, x, cols, cols, cols, BLOCK=1024, num_warps=4)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)

    n = 1024
    xh = rng.standard_normal((2, n)).astype(np.float16)
    w = rng.random(n).astype(np.float16)
    b = rng.random(n).astype(np.float16)
    y = np.zeros_like(xh)
    layernorm_kernel[(2,)](xh, y, w, b, n, n, 1e-5, BLOCK=1024, num_warps=4)
    xf = xh.astype(np.float32)
    ref = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y.astype(np.float32), ref, rtol=1e-2, atol=1e-2)
    assert emulated.launches >= 2


def test_conversion_then_reductions_on_the_emulator(emulated):
    x = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    out = np.zeros(64 + 32, np.float32)
    convert_then_reduce_kernel[(1,)](x, out, R=32, C=64, num_warps=4)
    np.testing.assert_allclose(out[:64], x.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[64:], x.max(axis=1))


@tegula.jit
def reduce_2d_kernel(x_ptr, o_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * C + c)
    tl.store(o_ptr + tl.arange(0, C), tl.sum(x, axis=0))
    tl.store(o_ptr + C + tl.arange(0, R), tl.max(x, axis=1))
    i = tl.argmax(x, axis=0)
    tl.store(o_ptr + C + R + tl.arange(0, C), i.to(tl.float32))


@pytest.mark.parametrize("shape, num_warps", [((64, 64), 8), ((32, 128), 16), ((256, 8), 8), ((8, 256), 16)])
def test_2d_reductions_over_many_warps_on_the_emulator(emulated, shape, num_warps):
    """Many warps: the partials are folded across lanes, which must only mix the
    partials of one output element."""
    R, C = shape
    x = np.random.default_rng(2).standard_normal((R, C)).astype(np.float32)
    out = np.zeros(2 * C + R, np.float32)
    reduce_2d_kernel[(1,)](x, out, R=R, C=C, num_warps=num_warps)
    np.testing.assert_allclose(out[:C], x.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[C:C + R], x.max(axis=1))
    np.testing.assert_array_equal(out[C + R:], x.argmax(axis=0))
