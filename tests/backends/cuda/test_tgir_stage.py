"""The GPU stage `tgir` as IR: tile types carry encodings, conversions are explicit
`convert_layout` ops, the text reads back as it was printed, an edited `asm["tgir"]`
(an override) is what gets compiled, the verifier rejects a missing conversion, and
the interpreter runs `tgir` bit-identically to the kernel it came from (translation
validation of the `cuda_tgir` pass pipeline)."""
from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import cuda_kernels as ck
import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda import encodings
from tegula.backends.cuda import layouts as LY
from tegula.backends.cuda.compiler import to_tgir
from tegula.backends.cuda.encodings import (
    BlockedEncoding,
    DotOperandEncoding,
    LinearEncoding,
    MmaEncoding,
    SliceEncoding,
    blocked_of,
    encoding_for,
)
from tegula.backends.cuda.layouts import default_blocked
from tegula.backends.cuda.linear_layout import LinearLayout
from tegula.backends.cuda.occupancy import ctas_per_sm
from tegula.backends.cuda.shared_memory import shared_bytes
from tegula.backends.interpreter import execute
from tegula.ir.encodings import parse_encoding
from tegula.ir.ops import Op
from tegula.ir.parser import parse_ir
from tegula.ir.printer import print_ir
from tegula.ir.types import F32, TileType, parse_type
from tegula.ir.verifier import VerificationError, verify
from tegula.runtime.source import ASTSource

GOLDEN = Path(__file__).with_name("golden_tgir")


@pytest.mark.parametrize("enc", [
    BlockedEncoding((1, 4), (2, 16), (4, 1), (1, 0)),
    MmaEncoding(2, (2, 2)), MmaEncoding(3, (8, 1)),
    DotOperandEncoding(0, MmaEncoding(3, (4, 1)), 2),
    SliceEncoding(1, 64, BlockedEncoding((1, 4), (2, 16), (4, 1), (1, 0))),
    LinearEncoding((1, 2, 512, 1024), (4, 8, 16, 32, 64), (128, 256)),
])
def test_encodings_read_back_and_give_their_layout(enc):
    assert parse_encoding(str(enc)) == enc
    t = TileType((64, 32), F32, enc) if not isinstance(enc, SliceEncoding) else TileType((16,), F32, enc)
    assert parse_type(str(t)) == t
    lay = enc.to_linear(t.shape)
    assert lay.covers() and encoding_for(lay, [enc]) == enc


def test_blocked_layouts_are_named_as_such():
    for shape, warps, vec, order in [((128,), 4, 4, None), ((64, 64), 8, 8, None), ((32, 64), 4, 2, (0, 1))]:
        lay = default_blocked(shape, warps, vec, order)
        enc = blocked_of(lay)
        assert enc is not None and enc.to_linear(shape) == lay


def test_blocked_of_finds_what_trying_every_order_finds(monkeypatch):
    """The orders blocked_of skips (those the layout's bases rule out) never held the
    answer: on random blocked layouts of ranks 1-4 (repeats, broadcast lanes/warps
    included) and on layouts that are not blocked, the same encoding or None as with
    every permutation tried (blocked_of as it was)."""
    pruned = encodings._orders
    rng = random.Random(27)
    checked = 0
    for _ in range(300):
        rank = rng.randint(1, 4)
        shape = tuple(1 << rng.randint(0, 4) for _ in range(rank))
        order = list(range(rank))
        rng.shuffle(order)
        lanes_left, warps_left = 5, rng.randint(0, 3)
        spt, tpw, wpc = [1] * rank, [1] * rank, [1] * rank
        for d in range(rank):
            spt[d] = 1 << rng.randint(0, 2)
        for d in order[:-1]:
            t = rng.randint(0, lanes_left)
            tpw[d], lanes_left = 1 << t, lanes_left - t
            w = rng.randint(0, warps_left)
            wpc[d], warps_left = 1 << w, warps_left - w
        tpw[order[-1]] *= 1 << lanes_left
        wpc[order[-1]] *= 1 << warps_left
        lay = LY.blocked(shape, spt, tpw, wpc, order)
        for candidate in (lay, LinearLayout(shape, lay.reg[::-1], lay.lane, lay.warp)):
            monkeypatch.setattr(encodings, "_orders", lambda rank, before: itertools.permutations(range(rank)))
            want = blocked_of(candidate)
            monkeypatch.setattr(encodings, "_orders", pruned)
            assert blocked_of(candidate) == want, (candidate, want)
            checked += want is not None
    assert checked > 300


def test_blocked_of_a_rank_10_tile():
    """`tl.sort` of 1024 elements works on a [2] * 10 tile: one order fits (the bases
    name it), found without trying 10! permutations."""
    shape = (2,) * 10
    lay = default_blocked(shape, 4, 1)
    enc = blocked_of(lay)
    assert enc is not None and enc.to_linear(shape) == lay


def test_bad_encodings_are_clear_errors():
    with pytest.raises(ValueError, match="unknown encoding '#nope'"):
        parse_encoding("#nope<x=1>")
    with pytest.raises(ValueError, match="does not describe a rank-1 tile"):
        BlockedEncoding((1, 4), (2, 16), (4, 1), (1, 0)).to_linear((128,))


@pytest.mark.parametrize("case", [ck.vector_add(block=128, n=1000), ck.row_sum_2d(16, 64, 1),
                                  ck.softmax(cols=4096, block=4096, num_warps=8)],
                         ids=lambda c: c.name)
def test_golden_tgir(case):
    """Layouts, conversions, and the allocator's placements: softmax's sum goes just
    after its max (bytes 32-63), so no barrier separates them."""
    kernel, _plan = to_tgir(case.kernel, case.num_warps, 3, 90, False)
    text = print_ir(kernel)
    assert text == (GOLDEN / f"{case.kernel.name}.tgir").read_text().rstrip("\n")
    assert print_ir(parse_ir(text)) == text


def test_a_missing_conversion_is_a_verifier_error():
    # (256 row sums, more than the threads: stored from a coalesced layout)
    kernel, _plan = to_tgir(ck.row_sum_2d(256, 64, 1).kernel, 4, 3, 90, False)
    text = print_ir(kernel)
    # feed the store the reduced value directly: its #slice is not the pointers' #blocked
    broken = re.sub(r"%(\d+) = convert_layout %(\d+) .*\n", "", text).replace("store %18, %19", "store %18, %12")
    with pytest.raises(VerificationError, match="store"):
        verify(parse_ir(broken), stage="tgir")


@tegula.jit
def _scaled_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def test_an_edited_tgir_override_is_what_gets_compiled(monkeypatch, tmp_path):
    src = ASTSource(_scaled_copy, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                    {"BLOCK": 1024}, attrs={"x_ptr": 16, "out_ptr": 16, "n": 16})
    target = GPUTarget("cuda", 90, 32)
    monkeypatch.setenv("TEGULA_ALWAYS_COMPILE", "1")
    k = tegula.compile(src, target=target)
    assert "ld.global.v4.b32" in k.asm["ptx"] and "spt=[4]" in k.asm["tgir"]
    # one element per thread instead of four: scalar loads and stores
    (tmp_path / "_scaled_copy.tgir").write_text(k.asm["tgir"].replace("spt=[4]", "spt=[1]"))
    monkeypatch.setenv("TEGULA_OVERRIDE_DIR", str(tmp_path))
    k2 = tegula.compile(src, target=target)
    assert "spt=[1]" in k2.asm["tgir"]
    assert "ld.global.v4.b32" not in k2.asm["ptx"] and "ld.global.b32" in k2.asm["ptx"]


@tegula.jit
def _attention_like(q_ptr, k_ptr, v_ptr, o_ptr, N, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm, rn, rd = tl.program_id(0) * BM + tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for start in range(0, N, BN):
        kt = tl.load(k_ptr + (start + rn)[None, :] * D + rd[:, None])
        s = tl.dot(q, kt)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + (start + rn)[:, None] * D + rd[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc / l_i[:, None])


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_translation_validation_of_the_gpu_stage(capability, num_warps):
    """The interpreter runs the tgir kernel (rings, conversions, dot_wait) to the same
    bits as the kernel the pipeline started from."""
    M, N, D, BM, BN = 128, 96, 32, 64, 32
    src = ASTSource(_attention_like, {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32",
                                      "N": "i32", "D": "constexpr", "BM": "constexpr", "BN": "constexpr"},
                    {"D": D, "BM": BM, "BN": BN}, attrs={"q_ptr": 16, "k_ptr": 16, "v_ptr": 16, "o_ptr": 16})
    monkey = {"num_warps": num_warps, "num_stages": 3}
    import os
    os.environ["TEGULA_ALWAYS_COMPILE"] = "1"
    try:
        source = tegula.compile(src, target=GPUTarget("cuda", capability, 32), options=monkey).ir
    finally:
        del os.environ["TEGULA_ALWAYS_COMPILE"]
    staged, _plan = to_tgir(source, num_warps, 3, capability, False)
    assert any(ins.op.value == "local_alloc" for ins in staged.walk())
    rng = np.random.default_rng(capability + num_warps)
    q = rng.standard_normal((M, D)).astype(np.float16)
    k = rng.standard_normal((N, D)).astype(np.float16)
    v = rng.standard_normal((N, D)).astype(np.float16)
    outs = []
    for kernel in (source, staged, parse_ir(print_ir(staged))):
        o = np.full((M, D), np.nan, np.float32)
        execute(kernel, (M // BM, 1, 1), [q, k, v, o, N])
        outs.append(o)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def _ast_kernel(fn, signature, constexprs, capability=90, num_warps=4, num_stages=3, attrs=None):
    import os
    os.environ["TEGULA_ALWAYS_COMPILE"] = "1"
    try:
        source = tegula.compile(ASTSource(fn, signature, constexprs, attrs=attrs),
                                target=GPUTarget("cuda", capability, 32),
                                options={"num_warps": num_warps, "num_stages": num_stages}).ir
    finally:
        del os.environ["TEGULA_ALWAYS_COMPILE"]
    return to_tgir(source, num_warps, num_stages, capability, False)[0]


@tegula.jit
def _sums_in_a_loop(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = 0.0
    for i in range(n):
        acc += tl.sum(tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK)), axis=0)
    tl.store(out_ptr, acc)


def test_a_reduction_in_a_loop_waits_for_the_previous_iteration():
    k = _ast_kernel(_sums_in_a_loop, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                    {"BLOCK": 1024}, num_warps=8)
    loop = next(ins for ins in k.walk() if ins.op is Op.FOR)
    body = [ins.op for ins in loop.regions[0].instrs]
    reduce_at = body.index(Op.REDUCE)
    assert body[reduce_at - 1] is Op.BARRIER    # the last iteration's readers of the partials
    red = loop.regions[0].instrs[reduce_at]
    assert red.smem == (0, 32)                   # 8 warps' f32 partials
    assert [ins.op for ins in k.walk()].count(Op.BARRIER) == 1


@tegula.jit
def _matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("capability", [80, 90])
def test_rings_are_placed_apart_and_fenced_by_barriers(capability):
    k = _ast_kernel(_matmul, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32", "BM": "constexpr",
                              "BN": "constexpr", "BK": "constexpr"}, {"BM": 64, "BN": 64, "BK": 32},
                    capability=capability, attrs={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16})
    instrs = list(k.walk())
    allocs = [ins for ins in instrs if ins.op is Op.LOCAL_ALLOC]
    assert len(allocs) == 2
    (a_off, a_size), (b_off, b_size) = (ins.smem for ins in allocs)
    assert a_off == 0 and a_size == 3 * 64 * 32 * 2 and b_off >= a_off + a_size and b_off % 1024 == 0
    # every wait for copies is followed by a barrier, every free preceded by one
    for block_ins in [ins for ins in instrs if ins.regions] + [None]:
        block = k.body if block_ins is None else block_ins.regions[0]
        ops = [ins.op for ins in block.instrs]
        for i, op in enumerate(ops):
            if op is Op.ASYNC_WAIT:
                assert ops[i + 1] is Op.BARRIER
            if op is Op.LOCAL_DEALLOC:
                assert ops[i - 1] is Op.BARRIER
    # the epilogue's scratch (the accumulator's conversion for the store) comes after
    # the buffers are freed, from offset 0
    scratch = [ins.smem for ins in instrs if ins.smem is not None and ins.op is not Op.LOCAL_ALLOC]
    assert all(off + size <= shared_bytes(k) for off, size in scratch)
    assert shared_bytes(k) == b_off + b_size


@tegula.jit
def _two_transposed_copies(x_ptr, y_ptr, n, B: tl.constexpr):
    r = tl.arange(0, B)
    for i in range(n):
        a = tl.load(x_ptr + (2 * i) * B * B + r[:, None] * B + r[None, :])
        tl.store(y_ptr + (2 * i) * B * B + r[:, None] + r[None, :] * B, a)
        b = tl.load(x_ptr + (2 * i + 1) * B * B + r[:, None] * B + r[None, :])
        tl.store(y_ptr + (2 * i + 1) * B * B + r[:, None] + r[None, :] * B, b * 2.0)


@pytest.mark.parametrize("capability", [80, 90])
def test_a_loops_scratch_uses_alternate_without_barriers(capability):
    """Two conversions through shared memory in one iteration: the second is placed
    after the first (within what costs no CTA per SM), so only the first waits for the
    previous iteration's readers; the bytes grow, the occupancy does not."""
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "B": "constexpr"}
    k = _ast_kernel(_two_transposed_copies, sig, {"B": 32}, capability=capability,
                    attrs={"x_ptr": 16, "y_ptr": 16})
    body = next(ins for ins in k.walk() if ins.op is Op.FOR).regions[0].instrs
    moves = [ins.smem for ins in body if ins.op is Op.CONVERT_LAYOUT and ins.smem is not None]
    assert len(moves) == 2
    (lo0, n0), (lo1, n1) = moves
    assert lo0 + n0 <= lo1 or lo1 + n1 <= lo0
    assert [ins.op for ins in body].count(Op.BARRIER) == 1
    # the growth costs no CTA per SM: the kernel's bytes still fit as many CTAs
    assert ctas_per_sm(32, 128, shared_bytes(k), capability) == ctas_per_sm(32, 128, max(n0, n1), capability)
