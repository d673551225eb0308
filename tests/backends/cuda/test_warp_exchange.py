"""Layout conversions inside a warp by shuffles (`backends/cuda/warp_exchange.py`).

Each plan is checked by simulating it lane by lane with element identities instead of
values: every sender packs the identities of its source registers into words, every
receiver fetches the words its plan names from the lanes its plan names and picks
entries with the `prmt` selector; each destination register must end up with the
element the destination layout gives it. The emulator and ptxas run the plan's code in
`test_wgmma_register_a` (fp8 attention's P feeding wgmma's register A)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import layouts as LY
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.linear_layout import LinearLayout
from tegula.backends.cuda.mma_layouts import mma_v2_accumulator, mma_v2_operand, mma_v3_accumulator, wgmma_register_a
from tegula.backends.cuda.warp_exchange import plan_exchange
from tegula.compiler import ASTSource
from tegula.runtime.compiler import optimized_ir


def _lane_part(lay: LinearLayout, lane: int) -> int:
    return lay.element(0, lane, 0)


def simulate(src: LinearLayout, dst: LinearLayout, elem_bits: int) -> None:
    plan = plan_exchange(src, dst, elem_bits)
    assert plan is not None
    per = plan.per_word
    # the element identity (flat index) each lane's source register holds, warp 0
    held = [[src.element(r, lane, 0) for r in range(src.n_regs)] for lane in range(32)]
    if plan.picks:  # 32-bit elements: senders pick a register, receivers a fetch
        assert len(plan.picks) == dst.n_regs
        for r, pp in enumerate(plan.picks):
            for lane in range(32):
                f = pp.fetches[pp.pick[lane]]
                sender = f.lanes[lane]
                assert held[sender][f.sent[sender]] == dst.element(r, lane, 0), (r, lane)
        return
    words = [[tuple(held[lane][r] for r in sw) for sw in plan.source_words] for lane in range(32)]
    for w, wp in enumerate(plan.words):
        for lane in range(32):
            fetched = [words[lanes[lane]][wp.source_word] for lanes in wp.lanes]
            fetched += fetched[:1] * (2 - len(fetched))
            bytes_per = 4 // per
            for p in range(per):
                nibble = wp.selector[lane] >> (4 * p * bytes_per) & 0xF
                q, byte = divmod(nibble, 4)
                got = fetched[q][byte // bytes_per]
                want = dst.element(w * per + p, lane, 0)
                assert got == want, (w, p, lane, got, want)


@pytest.mark.parametrize("shape,warps", [((64, 64), (4, 1)), ((128, 32), (8, 1)), ((128, 128), (8, 1)),
                                         ((64, 256), (4, 1))])
def test_wgmma_accumulator_to_8bit_register_a(shape, warps):
    """fp8 attention's P: the first dot's accumulator as the second dot's register A."""
    src = mma_v3_accumulator(shape, warps)
    dst = wgmma_register_a(shape, warps, 4)
    simulate(src, dst, 8)
    plan = plan_exchange(src, dst, 8)
    assert all(len(wp.lanes) == 2 for wp in plan.words)  # two shuffles and a prmt per register


def test_mma_sync_accumulator_to_8bit_operand():
    """The same exchange for mma.sync's fragments (sm_89 fp8 chains)."""
    src = mma_v2_accumulator((32, 64), (2, 1))
    dst = mma_v2_operand(0, (32, 64), (2, 1), 4)
    simulate(src, dst, 8)


@pytest.mark.parametrize("shape", [(16, 16), (32, 64), (64, 32)])
def test_tf32_fragments_from_an_accumulator(shape):
    """fla's chained 16x16 tf32 dots on one warp: an accumulator (or its transpose)
    becomes the next dot's A or B fragment by shuffles, two a register (lanes 2q and
    2q+1 read the same sender for its two registers), no shared memory."""
    from tegula.backends.cuda.layouts import permute_layout

    acc = mma_v2_accumulator(shape, (1, 1))
    for src in (acc, permute_layout(mma_v2_accumulator(shape[::-1], (1, 1)), (1, 0))):
        for k in (0, 1):
            dst = mma_v2_operand(k, shape, (1, 1), 1)
            simulate(src, dst, 32)
            plan = plan_exchange(src, dst, 32)
            assert max(len(pp.fetches) for pp in plan.picks) <= 2


def test_sixteen_bit_chain_needs_no_exchange():
    """A 16-bit P already sits where the A fragment wants it (register renaming)."""
    shape, warps = (64, 64), (4, 1)
    assert plan_exchange(mma_v3_accumulator(shape, warps), wgmma_register_a(shape, warps, 2), 16) is None


def test_conversions_across_warps_are_left_to_shared_memory():
    a = LY.default_blocked((64, 64), 4, 4, (1, 0))
    b = LY.default_blocked((64, 64), 4, 4, (0, 1))
    assert plan_exchange(a, b, 32) is None  # other warps hold the elements
    # and a conversion whose words draw from more lanes than shuffles allow
    src = mma_v3_accumulator((64, 64), (4, 1))
    dst = LinearLayout((64, 64), src.reg, tuple(reversed(src.lane[:2])) + src.lane[2:], src.warp)
    plan = plan_exchange(src, dst, 32)
    if plan is not None:
        simulate(src, dst, 32)


def test_fp8_attention_converts_p_with_shuffles():
    from test_wgmma_register_a import _kernel

    from tegula.backends.cuda.compiler import to_tgir
    from tegula.backends.cuda.encode_layouts import conversions

    kernel, _plan = to_tgir(_kernel("fp8e5", 64, 64, 64), 4, 3, 90, checked=False)
    kinds = [kind for ins, kind in conversions(kernel) if "xf8e5m2, #dot_op" in str(ins.results[0].type)]
    assert kinds == ["shuffle"]


@tegula.jit
def _permute_last_two(In, Out, S: tl.constexpr):
    offs = (tl.arange(0, S)[:, None, None, None] * S * S * S + tl.arange(0, S)[None, :, None, None] * S * S
            + tl.arange(0, S)[None, None, :, None] * S + tl.arange(0, S)[None, None, None, :])
    x = tl.load(In + offs)
    tl.store(Out + offs, tl.permute(x, (0, 1, 3, 2)))


@pytest.mark.parametrize("cap", [80, 90])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_narrow_elements_one_per_word(dtype, cap):
    """A 4x4x4x4 tile over 8 warps gives each thread one element, so the plan puts one
    8- or 16-bit element in each shuffled word (`per = 1`): it is truncated back out of
    its 32-bit slot (this was a bitcast i32 -> i8, which LLVM rejects: Triton's
    test_trans_4d[perm1-shape1-int8])."""
    S = 4
    sig = {"In": f"*{'i8' if dtype == 'int8' else 'i16'}", "Out": f"*{'i8' if dtype == 'int8' else 'i16'}"}
    kernel = optimized_ir(ASTSource(_permute_last_two, signature={**sig, "S": "constexpr"}, constexprs={"S": S}))
    x = np.random.default_rng(1).integers(-100, 100, size=(S, S, S, S)).astype(dtype)
    out = np.zeros_like(x)
    EmulatedKernel(kernel, 8, capability=cap).run((1, 1, 1), [x, out])
    np.testing.assert_array_equal(out, np.transpose(x, (0, 1, 3, 2)))


@pytest.mark.parametrize("dst_of", [
    lambda: mma_v2_accumulator((128, 128), [1, 1]),            # independent bases, the solved-by-parts path
    lambda: LY.blocked((128, 128), [1, 8], [2, 16], [1, 1], [1, 0]),
    lambda: LY.blocked((16, 64), [1, 4], [8, 4], [1, 1], [0, 1]),
], ids=["mma", "blocked", "small"])
def test_the_sources_solved_by_parts_are_those_solved_one_by_one(dst_of):
    """`_sources` combines a register's and a lane's solutions where the source's bases
    are independent (the solution is then unique): each (register, lane) gets what
    solving it alone gives, dependent (broadcast) bases included."""
    from tegula.backends.cuda.linear_layout import solve
    from tegula.backends.cuda.warp_exchange import _sources

    dst = dst_of()
    for src in (LY.blocked(dst.shape, [1, 4], [4, 8], [1, 1], [1, 0]),
                LinearLayout(dst.shape, dst.reg[:-1] + (0,), dst.lane, dst.warp)):  # a broadcast register bit
        bases = src.reg + src.lane
        sources = _sources(bases, dst)
        for r in range(dst.n_regs):
            for lane in range(32):
                assert sources(r, lane) == solve(bases, dst.reg_element(r) ^ _lane_part(dst, lane))
