"""A persistent kernel's staged operand copied one tile ahead (`tile_prefetch`, sm_90a):
where the copies go in the GPU stage, and the results on the host emulator — with
programs that walk a tile count that is not a multiple of theirs, and programs with no
tile at all (their first copy is masked off) — against float64 numpy."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda.compiler import to_tgir
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.compiler import ASTSource
from tegula.ir.ops import Op
from tegula.runtime.compiler import optimized_ir


@tegula.jit
def per_tile_weights(x_ptr, w_ptr, y_ptr, T, R, BM: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    """y[t] = x[t] @ w[t] for T tiles, each x[t] of R rows walked BM rows at a time:
    w[t], read by every dot of the tile's inner loop, is the staged B operand."""
    offs_k = tl.arange(0, K)
    offs_n = tl.arange(0, N)
    for t in tl.range(tl.program_id(0), T, tl.num_programs(0)):
        w = tl.load(w_ptr + t * K * N + offs_k[:, None] * N + offs_n[None, :])
        for r in range(0, R, BM):
            rows = r + tl.arange(0, BM)
            x = tl.load(x_ptr + t * R * K + rows[:, None] * K + offs_k[None, :], mask=rows[:, None] < R, other=0.0)
            y = tl.dot(x, w)
            tl.store(y_ptr + t * R * N + rows[:, None] * N + offs_n[None, :], y.to(tl.float16),
                     mask=rows[:, None] < R)


@tegula.jit
def per_tile_tail(x_ptr, w_ptr, u_ptr, y_ptr, T, R, BM: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    """per_tile_weights, then each tile's last row block times u[t] added to its first
    row block: u[t], read by a dot after the inner loop, is a staged B operand of the
    tile's body (the attention forward's last V block)."""
    offs_k = tl.arange(0, K)
    offs_n = tl.arange(0, N)
    rows0 = tl.arange(0, BM)
    for t in tl.range(tl.program_id(0), T, tl.num_programs(0)):
        w = tl.load(w_ptr + t * K * N + offs_k[:, None] * N + offs_n[None, :])
        x = tl.zeros((BM, K), dtype=tl.float16)
        for r in range(0, R, BM):
            rows = r + rows0
            x = tl.load(x_ptr + t * R * K + rows[:, None] * K + offs_k[None, :], mask=rows[:, None] < R, other=0.0)
            y = tl.dot(x, w)
            tl.store(y_ptr + t * R * N + rows[:, None] * N + offs_n[None, :], y.to(tl.float16),
                     mask=rows[:, None] < R)
        u = tl.load(u_ptr + t * K * N + offs_k[:, None] * N + offs_n[None, :])
        z = tl.dot(x, u)
        first = y_ptr + t * R * N + rows0[:, None] * N + offs_n[None, :]
        tl.store(first, (tl.load(first).to(tl.float32) + z).to(tl.float16))


@tegula.jit
def indexed_tile_weights(x_ptr, w_ptr, idx_ptr, y_ptr, T, R, BM: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    """per_tile_weights with tile t's weights w[idx[t]]: the staged operand's address
    reads memory (idx has T entries: the next tile's address code, cloned, would read
    idx[T] past the last tile)."""
    offs_k = tl.arange(0, K)
    offs_n = tl.arange(0, N)
    for t in tl.range(tl.program_id(0), T, tl.num_programs(0)):
        which = tl.load(idx_ptr + t)
        w = tl.load(w_ptr + which * K * N + offs_k[:, None] * N + offs_n[None, :])
        for r in range(0, R, BM):
            rows = r + tl.arange(0, BM)
            x = tl.load(x_ptr + t * R * K + rows[:, None] * K + offs_k[None, :], mask=rows[:, None] < R, other=0.0)
            tl.store(y_ptr + t * R * N + rows[:, None] * N + offs_n[None, :], tl.dot(x, w).to(tl.float16),
                     mask=rows[:, None] < R)


SIG = {"x_ptr": "*fp16", "w_ptr": "*fp16", "y_ptr": "*fp16", "T": "i32", "R": "i32",
       "BM": "constexpr", "K": "constexpr", "N": "constexpr"}
CX = {"BM": 64, "K": 64, "N": 64}


def _ir():
    return optimized_ir(ASTSource(per_tile_weights, signature=SIG, constexprs=CX))


def _tile_loop(block):
    return next(i for i in block.instrs if i.op is Op.FOR)


def test_the_next_tiles_copy_follows_this_tiles_last_reader():
    staged, _plan = to_tgir(_ir(), 4, 3, 90, False)
    top = staged.body.instrs
    loop = _tile_loop(staged.body)
    at = top.index(loop)
    before = [i.op for i in top[:at]]
    # the buffer and the first tile's copy before the tile loop
    assert Op.LOCAL_ALLOC in before and Op.ASYNC_COPY in before
    buf = next(i for i in top[:at] if i.op is Op.ASYNC_COPY).operands[0]
    body = loop.regions[0].instrs
    inner = next(n for n, i in enumerate(body) if i.op is Op.FOR)
    mine = [n for n, i in enumerate(body) if i.op is Op.ASYNC_COPY and i.operands[0] is buf]
    # the tile waits for its copy before its inner loop (the loop's own prologue copies
    # left in flight), and copies the next one after it
    wait = next(i for i in body[:inner] if i.op is Op.ASYNC_WAIT)
    assert wait.attrs.pending == sum(i.op is Op.ASYNC_COMMIT for i in body[:body.index(wait)]) > 0
    assert len(mine) == 1 and mine[0] > inner
    # every warp done with the buffer before the copy overwrites it
    assert any(i.op is Op.BARRIER for i in body[inner + 1:mine[0]])
    assert not any(i.op is Op.LOCAL_DEALLOC and i.operands[0] is buf for i in body)
    after = [i.op for i in top[at + 1:]]
    assert after.index(Op.ASYNC_WAIT) < after.index(Op.LOCAL_DEALLOC)


def test_without_prefetch_each_tile_copies_at_its_top():
    staged, _plan = to_tgir(_ir(), 4, 3, 90, False, prefetch_tiles=False)
    loop = _tile_loop(staged.body)
    body = [i.op for i in loop.regions[0].instrs]
    assert Op.LOCAL_ALLOC in body and Op.LOCAL_DEALLOC in body
    assert not any(i.op is Op.ASYNC_COPY for i in staged.body.instrs)


@pytest.mark.parametrize("programs", [2, 7])
def test_prefetched_tiles_match_numpy(programs):
    """5 tiles of 100 rows: 2 programs walk 3 and 2 tiles; of 7, two have none."""
    T, R, K, N = 5, 100, 64, 64
    rng = np.random.default_rng(programs)
    x = rng.standard_normal((T, R, K)).astype(np.float16)
    w = rng.standard_normal((T, K, N)).astype(np.float16)
    want = np.einsum("trk,tkn->trn", x.astype(np.float64), w.astype(np.float64))
    ek = EmulatedKernel(_ir(), 4, capability=90, num_stages=3)
    y = np.full((T, R, N), np.nan, np.float16)
    ek.run((programs, 1, 1), [x, w, y, T, R])
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-2, atol=5e-2)


TAIL_SIG = {"x_ptr": "*fp16", "w_ptr": "*fp16", "u_ptr": "*fp16", "y_ptr": "*fp16", "T": "i32", "R": "i32",
            "BM": "constexpr", "K": "constexpr", "N": "constexpr"}


def _tail_ir():
    return optimized_ir(ASTSource(per_tile_tail, signature=TAIL_SIG, constexprs=CX))


def test_a_copy_read_after_the_inner_loop_stays_behind_its_stores():
    """u's copy may not move above the inner loop: the loop stores (the copy might read
    what it writes), so it stays after it."""
    staged, _plan = to_tgir(_tail_ir(), 4, 3, 90, False)
    body = _tile_loop(staged.body).regions[0].instrs
    inner = next(n for n, i in enumerate(body) if i.op is Op.FOR)
    copies = [n for n, i in enumerate(body) if i.op is Op.ASYNC_COPY]
    assert any(n > inner for n in copies)


@pytest.mark.parametrize("programs", [2, 7])
def test_prefetched_tiles_with_a_tail_operand_match_numpy(programs):
    T, R, K, N = 5, 100, 64, 64
    rng = np.random.default_rng(10 + programs)
    x = rng.standard_normal((T, R, K)).astype(np.float16)
    w = rng.standard_normal((T, K, N)).astype(np.float16)
    u = rng.standard_normal((T, K, N)).astype(np.float16)
    want = np.einsum("trk,tkn->trn", x.astype(np.float64), w.astype(np.float64))
    last = np.zeros((T, 64, K))
    last[:, :R - 64] = x[:, 64:]  # the last row block (rows 64..127): those past R load as zeros
    want[:, :64] = want[:, :64].astype(np.float16).astype(np.float64) + np.einsum(
        "trk,tkn->trn", last, u.astype(np.float64))
    ek = EmulatedKernel(_tail_ir(), 4, capability=90, num_stages=3)
    y = np.full((T, R, N), np.nan, np.float16)
    ek.run((programs, 1, 1), [x, w, u, y, T, R])
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-2, atol=1e-1)


@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
def test_the_persistent_attention_forward_copies_q_ahead_and_v_under_its_kv_loop(causal):
    """The library's persistent forward at its tuned D128 config (128x128 blocks, 2
    stages, 8 warps, warp-specialized, sm_90a): the first tile's Q block is copied before
    the consumers' tile loop, the next tile's after the KV loop, and each tile's last V
    block (read after the KV loop) before it: the KV loop's consumers wait on mbarriers,
    not on copy groups, so the copy runs under the loop."""
    from attention_ir import persistent_forward_ir

    ir = persistent_forward_ir(causal)
    staged, _plan = to_tgir(ir, 8, 2, 90, False)
    split = next(i for i in staged.body.instrs if i.op is Op.IF)
    consumers = split.regions[1].instrs
    at = next(n for n, i in enumerate(consumers) if i.op is Op.FOR)
    q_buf = next(i for i in consumers[:at] if i.op is Op.ASYNC_COPY).operands[0]
    body = consumers[at].regions[0].instrs
    kv = next(n for n, i in enumerate(body) if i.op is Op.FOR)
    before, after = body[:kv], body[kv + 1:]
    assert [i for i in before if i.op is Op.ASYNC_COPY and i.operands[0] is not q_buf]  # the last V block
    assert not [i for i in before if i.op is Op.ASYNC_COPY and i.operands[0] is q_buf]
    assert [i for i in after if i.op is Op.ASYNC_COPY and i.operands[0] is q_buf]  # the next tile's Q


def test_an_address_that_reads_memory_is_not_copied_ahead():
    sig = {"x_ptr": "*fp16", "w_ptr": "*fp16", "idx_ptr": "*i32", "y_ptr": "*fp16", "T": "i32", "R": "i32",
           "BM": "constexpr", "K": "constexpr", "N": "constexpr"}
    ir = optimized_ir(ASTSource(indexed_tile_weights, signature=sig, constexprs=CX))
    staged, _plan = to_tgir(ir, 4, 3, 90, False)
    assert not any(i.op is Op.ASYNC_COPY for i in staged.body.instrs)  # no first-tile copy before the loop
    T, R, K, N = 5, 100, 64, 64
    rng = np.random.default_rng(5)
    x = rng.standard_normal((T, R, K)).astype(np.float16)
    w = rng.standard_normal((3, K, N)).astype(np.float16)
    idx = np.array([2, 0, 1, 2, 0], np.int32)
    want = np.einsum("trk,tkn->trn", x.astype(np.float64), w[idx].astype(np.float64))
    ek = EmulatedKernel(ir, 4, capability=90, num_stages=3)
    y = np.full((T, R, N), np.nan, np.float16)
    ek.run((7, 1, 1), [x, w, idx, y, T, R])
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-2, atol=5e-2)
