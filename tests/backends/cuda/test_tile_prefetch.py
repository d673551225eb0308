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
