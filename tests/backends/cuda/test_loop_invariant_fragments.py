"""mma.sync operands defined outside the loop their dot is in are converted to their
fragments once, before the loop (`layout_anchors.shared_fragments`, the conversion
hoisted by `encode_layouts`), instead of being staged through the dot's scratch in every
iteration — the shape of fla's `prepare_wy_repr_bwd`, whose 64x64 `A` (loaded
column-major) is a dot's A in three loops. The conversion of a column-major tile goes
through a column-major scratch: 16-byte stores and `ldmatrix.trans` reads
(`convert._scratch`). An accumulator converted to the next dot's A fragment pads its
scratch rows by 16 bytes so that `ldmatrix` reads it; an f16 accumulator stored
column-major is written into a column-major scratch by `stmatrix.trans` (sm_90) and
read back 16 bytes at a time. Checked on the emulator at
capability 80 and 90 against float64 products with fresh inputs, on the tgir (no
conversion and no dot scratch in the loop) and the PTX (ptxas assembles it)."""
from __future__ import annotations

import numpy as np
import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda import layouts as LY
from tegula.backends.cuda.convert import _scratch
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.mma_layouts import mma_v2_accumulator, mma_v2_operand
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.ir.ops import Op


@tegula.jit
def invariant_a(a_ptr, b_ptr, out_ptr, N, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    """out[:, j] = A @ B[:, j] for each block j of N columns; A [BM, BK] is stored
    column-major (A[m, k] at a_ptr + k * BM + m) and loaded once, before the loop."""
    rm, rk, rn = tl.arange(0, BM), tl.arange(0, BK), tl.arange(0, BN)
    a = tl.load(a_ptr + rm[:, None] + rk[None, :] * BM)
    for j in range(0, N, BN):
        cols = j + rn
        live = cols < N
        b = tl.load(b_ptr + rk[:, None] * N + cols[None, :], mask=live[None, :], other=0.0)
        c = tl.dot(a, b)
        tl.store(out_ptr + rm[:, None] * N + cols[None, :], c, mask=live[None, :])


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp32", "N": "i32",
       "BM": "constexpr", "BK": "constexpr", "BN": "constexpr"}


def _kernel():
    return tir_opt(invariant_a, SIG, {"BM": 64, "BK": 64, "BN": 32},
                   attrs={"a_ptr": 16, "b_ptr": 16, "out_ptr": 16, "N": 16})


@pytest.mark.parametrize("num_warps", [2, 4])
@pytest.mark.parametrize("capability", [80, 90])
def test_invariant_operand_on_the_emulator(num_warps, capability):
    kernel = _kernel()
    rng = np.random.default_rng(10 * num_warps + capability)
    n = 112  # not a multiple of the 32-column block
    a = rng.uniform(-1, 1, (64, 64)).astype(np.float16)
    b = rng.uniform(-1, 1, (64, n)).astype(np.float16)
    out = np.full((64, n), np.nan, np.float32)
    ek = EmulatedKernel(kernel, num_warps, capability=capability, num_stages=2)
    ek.run((1, 1, 1), [np.ascontiguousarray(a.T), b, out, n])
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


def _loop(tgir_kernel):
    return next(i for i in tgir_kernel.walk() if i.op is Op.FOR)


@pytest.mark.parametrize("capability", [80, 90])
def test_converted_once_before_the_loop(capability):
    """On 2 warps (mma.sync, warps side by side along N) the loop neither converts A nor
    stages an operand: A's fragments come from a conversion before the loop, B is read
    in place from its ring slot. The conversion writes A column-major, 16 bytes a store,
    and reads it with ldmatrix.trans."""
    asm = compile_kernel(_kernel(), {"num_warps": 2, "num_stages": 2}, capability)[0]
    ek = EmulatedKernel(_kernel(), 2, capability=capability, num_stages=2)
    body = list(_loop(ek.lowering.kernel).regions[0].walk())
    assert [i for i in body if i.op is Op.CONVERT_LAYOUT and len(i.results[0].type.shape) == 2
            and "f16" in str(i.results[0].type)] == []
    dots = [i for i in body if i.op is Op.DOT]
    assert len(dots) == 1 and dots[0].smem is None
    ptx = asm["ptx"]
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert "st.shared.b16" not in ptx  # A written 16 bytes a store, not one element
    if capability == 90 and find_ptxas() is not None:
        assert asm.get("cubin")


def test_column_major_scratch_is_chosen_by_its_accesses():
    """A column-major 16-bit tile into an A fragment: transposed scratch (vector stores,
    ldmatrix.trans); an accumulator into an A fragment: rows padded by 16 bytes
    (stmatrix/ldmatrix possible); a row-major tile into a blocked layout: as before."""
    col = LY.default_blocked((64, 64), 2, 8, (0, 1))
    a_frag = mma_v2_operand(0, (64, 64), (1, 2), 2)
    sc = _scratch(col, a_frag, 2, 80)
    assert sc.src.shape == (64, 64) and sc.w == 8 and sc.reads() is not None and sc.reads()[2]
    acc = mma_v2_accumulator((64, 64), (1, 2))
    sc = _scratch(acc, a_frag, 2, 90)
    assert sc.pad == 8 and sc.reads() is not None and not sc.reads()[2]
    row = LY.default_blocked((64, 64), 4, 8, (1, 0))
    sc = _scratch(acc, row, 4, 90)
    assert sc.src is acc and sc.pad == max(sc.w, sc.r)


@tegula.jit
def chained(a_ptr, b_ptr, e_ptr, out_ptr, N: tl.constexpr):
    """out = (A @ B).to(f16) @ E: the first dot's accumulator is the second's A."""
    r = tl.arange(0, N)
    offs = r[:, None] * N + r[None, :]
    c = tl.dot(tl.load(a_ptr + offs), tl.load(b_ptr + offs)).to(tl.float16)
    tl.store(out_ptr + offs, tl.dot(c, tl.load(e_ptr + offs)))


@pytest.mark.parametrize("capability", [80, 90])
def test_accumulator_into_a_fragment(capability):
    kernel = tir_opt(chained, {"a_ptr": "*fp16", "b_ptr": "*fp16", "e_ptr": "*fp16", "out_ptr": "*fp32",
                               "N": "constexpr"}, {"N": 64}, num_stages=1,
                     attrs={"a_ptr": 16, "b_ptr": 16, "e_ptr": 16, "out_ptr": 16})
    rng = np.random.default_rng(capability)
    a, b, e = (rng.uniform(-1, 1, (64, 64)).astype(np.float16) for _ in range(3))
    out = np.full((64, 64), np.nan, np.float32)
    EmulatedKernel(kernel, 2, capability=capability, num_stages=1).run((1, 1, 1), [a, b, e, out])
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(out, c @ e.astype(np.float64), rtol=2e-3, atol=2e-2)


@tegula.jit
def transposed_product(a_ptr, b_ptr, ct_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """C = A @ B stored transposed (C^T row-major: C column-major) in f16."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.dot(a, b).to(tl.float16)
    tl.store(ct_ptr + rm[:, None] + rn[None, :] * M, c)


@pytest.mark.parametrize("capability", [80, 90])
def test_an_accumulator_stored_column_major(capability):
    """The f16 accumulator converted to the column-major store's layout goes through a
    column-major scratch: on sm_90 written by stmatrix.trans (the pairs of the
    accumulator run across the scratch's rows) and read 16 bytes at a time."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "ct_ptr": "*fp16", "M": "constexpr", "N": "constexpr",
           "K": "constexpr"}
    kernel = tir_opt(transposed_product, sig, {"M": 64, "N": 64, "K": 32}, num_stages=1,
                     attrs={"a_ptr": 16, "b_ptr": 16, "ct_ptr": 16})
    ptx = compile_kernel(kernel, {"num_warps": 4, "num_stages": 1}, capability)[0]["ptx"]
    if capability == 90:
        assert "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert "ld.shared.v4.b32" in ptx and "ld.shared.b16" not in ptx
    rng = np.random.default_rng(capability + 5)
    a = rng.integers(-3, 4, (64, 32)).astype(np.float16)
    b = rng.integers(-3, 4, (32, 64)).astype(np.float16)
    ct = np.full((64, 64), np.nan, np.float16)
    EmulatedKernel(kernel, 4, capability=capability, num_stages=1).run((1, 1, 1), [a, b, ct])
    np.testing.assert_array_equal(ct, (a.astype(np.float64) @ b.astype(np.float64)).T.astype(np.float16))
