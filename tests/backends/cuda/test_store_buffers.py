"""A loop's TMA stores through buffers of their own (`store_buffers`, sm_90a): where the
buffer, the store and the waits go in the GPU stage and the PTX, the results on the host
emulator against float64 numpy (programs walking more tiles than one, and none), and the
order in which `compile_kernel` gives extra buffers up when shared memory runs short."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda.compiler import compile_kernel, to_tgir
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.compiler import ASTSource
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      EVEN_ONLY: tl.constexpr):
    """C = A @ B by BMxBN tiles walked round robin, each through a K loop, C written
    through a descriptor (under an `if` with EVEN_ONLY: only the even tiles)."""
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    tiles_n = tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, tl.num_programs(0)):
        pm = t // tiles_n
        pn = t % tiles_n
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            rk = k + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        if EVEN_ONLY:
            if t % 2 == 0:
                c_desc.store([pm * BM, pn * BN], acc.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([pm * BM, pn * BN], acc.to(c_ptr.dtype.element_ty))


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
       "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "EVEN_ONLY": "constexpr"}
ATTRS = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "N": 8, "K": 8}


def _ir(even_only=False):
    cx = {"BM": 64, "BN": 64, "BK": 32, "EVEN_ONLY": even_only}
    return optimized_ir(ASTSource(persistent_matmul, signature=SIG, constexprs=cx, attrs=ATTRS))


def _tile_loop(block):
    return next(i for i in block.instrs if i.op is Op.FOR)


def test_a_loops_store_gets_a_buffer_waited_for_after_the_loop():
    staged, _plan = to_tgir(_ir(), 4, 3, 90, False)
    top = staged.body.instrs
    loop = _tile_loop(staged.body)
    at = top.index(loop)
    stores = [i for i in loop.walk() if i.op is Op.TMA_STORE]
    assert len(stores) == 1 and not any(i.op is Op.DESCRIPTOR_STORE for i in staged.walk())
    buf = stores[0].operands[0]
    assert buf.owner in top[:at] and buf.owner.op is Op.LOCAL_ALLOC
    after = top[at + 1:]
    wait = next(i for i in after if i.op is Op.BULK_WAIT)
    free = next(i for i in after if i.op is Op.LOCAL_DEALLOC and i.operands[0] is buf)
    assert wait.attrs.pending == 0 and after.index(wait) < after.index(free)
    # nothing else shares the buffer's bytes while the loop runs
    lo, size = buf.owner.smem
    for ins in loop.walk():
        if ins.smem is not None:
            assert ins.smem[0] + ins.smem[1] <= lo or ins.smem[0] >= lo + size, ins


def test_the_wait_for_the_copy_engine_moves_before_the_next_write():
    asm, _md = compile_kernel(_ir(), {"num_warps": 4, "num_stages": 3}, 90)
    ptx = asm["ptx"]
    waits = [n for n, line in enumerate(ptx.splitlines()) if "cp.async.bulk.wait_group.read" in line]
    issues = [n for n, line in enumerate(ptx.splitlines()) if "cp.async.bulk.tensor.2d.global.shared" in line]
    # one wait before the store's writes in the loop, one after the loop: none right
    # after the copies are issued
    assert len(waits) == 2 and waits[0] < issues[0] <= issues[-1] < waits[1]


def test_without_buffers_the_store_keeps_its_scratch():
    staged, _plan = to_tgir(_ir(), 4, 3, 90, False, buffer_stores=False)
    assert any(i.op is Op.DESCRIPTOR_STORE for i in staged.walk())
    assert not any(i.op in (Op.TMA_STORE, Op.BULK_WAIT) for i in staged.walk())


@pytest.mark.parametrize("even_only", [False, True], ids=["every_tile", "under_if"])
@pytest.mark.parametrize("programs", [2, 7])
def test_buffered_stores_match_numpy(programs, even_only):
    """3x2 tiles of C (100 x 72, K = 80): 2 programs walk 3 tiles each; of 7, one has none."""
    M, N, K = 100, 72, 80
    rng = np.random.default_rng(programs + 10 * even_only)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float64)
    ek = EmulatedKernel(_ir(even_only), 4, capability=90, num_stages=3)
    assert any(i.op is Op.TMA_STORE for i in ek.lowering.kernel.walk())
    c = np.full((M, N), 7, np.float16)
    ek.run((programs, 1, 1), [a, b, c, M, N, K])
    if even_only:
        for t in range(1, 6, 2):  # the odd tiles (2 a row) are not written
            pm, pn = divmod(t, 2)
            want[pm * 64:pm * 64 + 64, pn * 64:pn * 64 + 64] = 7
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_store_buffers_go_before_tile_copies_and_stages_when_shared_memory_runs_short(monkeypatch):
    """The persistent attention forward at D128, 128x128 blocks, 2 stages takes all of
    the H200's 232448 bytes with its output's buffer; with 32 KB less, it compiles
    without the buffer but keeps its Q copies a tile ahead and its 2 stages."""
    from attention_ir import persistent_forward_ir

    from tegula.backends.cuda import compiler

    ir = persistent_forward_ir(causal=False)
    staged, _plan = to_tgir(ir, 8, 2, 90, False)
    assert any(i.op is Op.TMA_STORE for i in staged.walk())
    full = compiler.shared_bytes(staged)
    monkeypatch.setattr(compiler, "shared_capacity", lambda cap: full - 32768)
    asm, md = compile_kernel(ir, {"num_warps": 8, "num_stages": 2}, 90)
    tgir = asm["tgir"]
    assert "tma_store" not in tgir and "descriptor_store" in tgir
    assert "smem<2x128x128xf16>" in tgir  # the rings keep both stages
    assert md["shared"] <= full - 32768


def test_a_buffered_store_between_turns_drops_them():
    """A warpgroup holding its turn must not reach a barrier the other one needs to
    pass: a `tma_store` hands its buffer over and writes it between CTA barriers, so a
    loop with one between a turn's wait and its pass loses its turns, as with any op
    whose consumers meet (`warpgroup_turns.drop_blocked_turns`)."""
    from tegula.backends.cuda.warpgroup_turns import drop_blocked_turns
    from tegula.ir import attrs as A
    from tegula.ir.builder import Builder, new_kernel
    from tegula.ir.core import Block
    from tegula.ir.types import F32, I32, I64, PointerType, SmemType, TensorDescType

    k = new_kernel("k", [PointerType(F32), I32], ["x", "n"])
    x, n = k.args
    b = Builder(k.body)
    desc = b.op1(Op.MAKE_TENSOR_DESCRIPTOR, x, n, n, b.constant(64, I64), b.constant(1, I64),
                 type=TensorDescType((8, 16), F32))
    buf = b.op1(Op.LOCAL_ALLOC, type=SmemType((1, 8, 16), F32))
    zero = b.constant(0, I32)

    def turn(step):
        b.create(Op.WARPGROUP_TURN, [], A.WarpgroupTurnAttrs(step, 2, 2))

    turn("begin")
    body = Block()
    iv = body.add_arg(I32)
    b.create(Op.FOR, [zero, n, b.constant(1, I32)], regions=[body])
    with b.at_end_of(body):
        turn("wait")
        blk = b.op1(Op.DESCRIPTOR_LOAD, desc, iv, zero)
        b.create(Op.TMA_STORE, [buf, desc, iv, zero, blk])
        turn("pass")
        b.yield_([])
    turn("end")
    b.create(Op.BULK_WAIT, [], A.AsyncWaitAttrs(0))
    b.create(Op.LOCAL_DEALLOC, [buf])
    b.create(Op.RETURN, [])
    assert drop_blocked_turns(k) == 1
    assert not any(ins.op is Op.WARPGROUP_TURN for ins in k.walk())
