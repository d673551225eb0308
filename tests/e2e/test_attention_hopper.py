"""The attention forward's descriptor path on Hopper, emulated at sm_90a or compiled
only: Q, K, V by TMA, the output by a TMA store, release of ring slots by arrival, the
warp-specialized loop with its warpgroup turns (FlashAttention-3's ping-pong), a
one-span block mask walked as the dense loops, and the shared memory and operand
staging that keep the specialized D128 kernel pipelined."""
import math

import pytest

torch = pytest.importorskip("torch")

from test_attention_kernels import reference  # noqa: E402

from tegula.kernels import create_block_mask, mods  # noqa: E402
from tegula.kernels.attention_fwd import attention_fwd_kernel  # noqa: E402  (the `on` fixture clears its cache)


def _forward_through_descriptors(q, k, v, causal, BM, BN, warps, stages, warp_specialize=False, block_mask=None,
                                 one_loop=False, programs=None):
    """The forward kernel's descriptor path launched directly with one config (with a
    block mask of at most one span per Q block: the ONE_SPAN walk); with `programs`,
    persistent: that many programs walk the tiles."""
    import importlib

    library = importlib.import_module("tegula.kernels.attention")
    from tegula.kernels.attention_configs import descriptor_blocks

    Z, H, N, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((Z, H, N), dtype=torch.float32)
    assert library.forward_descriptors_apply(q, k, v, o)
    descs = library._row_descriptors(q, k, v, o)
    nargs = dict(q_ptr=descs[0], k_ptr=descs[1], v_ptr=descs[2], out_ptr=descs[3], DESC=True, BLOCK_M=BM,
                 BLOCK_N=BN, HEAD_DIM=D)
    descriptor_blocks(nargs)
    sparse, mask_fn, mask_args, blocks = (), None, (), (1, 1)
    if block_mask is not None:
        assert block_mask.most_spans(Z, H, False) <= 1
        sparse, blocks = block_mask.kernel_args(Z, H, False), (block_mask.q_block, block_mask.kv_block)
        mask_fn, mask_args = block_mask.mask_mod.fn, tuple(block_mask.mask_mod.args)
        causal = block_mask.causal
    grid = (N // BM, Z * H) if programs is None else (programs, 1)
    compiled = attention_fwd_kernel[grid](
        *descs, lse, *q.stride(), H, N, sparse, None, (), mask_fn, mask_args, HEAD_DIM=D, SM_SCALE=D ** -0.5,
        CAUSAL=causal, SPARSE=block_mask is not None, SPARSE_Q=blocks[0], SPARSE_KV=blocks[1], PRECISION="tf32",
        ON_GPU=False, IN_RANGE=True, DESC=True, BLOCK_M=BM, BLOCK_N=BN, WARP_SPECIALIZE=warp_specialize,
        ONE_SPAN=block_mask is not None, ONE_LOOP=one_loop, PERSISTENT=programs is not None, ZH=Z * H,
        num_warps=warps, num_stages=stages)
    return o, lse, compiled


@pytest.mark.parametrize("on", ["cuda-emulated-sm90"], indirect=True)
@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
@pytest.mark.parametrize("by_arrival", [False, True], ids=["barrier", "release_by_arrival"])
def test_descriptor_forward_runs_on_tma(on, causal, by_arrival, monkeypatch):
    """On Hopper the descriptor path's Q, K, V blocks arrive by TMA and the output leaves
    by a TMA store, feeding wgmma (emulated at sm_90a, a GPU-sized config, every thread
    an OS thread). With `TEGULA_TMA_RELEASE_BY_ARRIVAL` the warps release each slot by
    an mbarrier arrival that only the issuing thread waits for: no CTA barrier in the
    loop, and the same results."""
    monkeypatch.setenv("TEGULA_TMA_RELEASE_BY_ARRIVAL", "1" if by_arrival else "0")
    Z, H, N, D = 1, 2, 128, 32
    q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
    o, lse, compiled = _forward_through_descriptors(q, k, v, causal, 64, 64, 4, 2)
    tgir = compiled.asm["tgir"]
    # a descriptor store left in the GPU IR is a TMA store (others become pointer stores)
    assert "tma_load" in tgir and "descriptor_store" in tgir and "version=3" in tgir
    assert ("issuer_only = True" in tgir) == by_arrival
    # the loops' slot release: one CTA barrier per iteration, or one arrival per warp
    assert ("debug_barrier" in tgir, "mbarrier_arrive" in tgir) == (not by_arrival, by_arrival)
    want = reference(q.double(), k.double(), v.double(), causal=causal)
    torch.testing.assert_close(o.double(), want, atol=2e-3, rtol=2e-3)
    s = (q.double() @ k.double().transpose(-1, -2)) * D ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1) / math.log(2), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("on", ["cuda-emulated-sm90"], indirect=True)
@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
@pytest.mark.parametrize("config", [(64, 64, 4, 3), (128, 128, 8, 2)], ids=["64x64s3w4", "128x128s2w8"])
def test_descriptor_forward_warp_specialized(on, causal, config):
    """WARP_SPECIALIZE (a config's): the dense loops' TMA copies are issued by a producer
    warpgroup, the kernel's own warps only compute, and two consumer warpgroups take
    turns at their dots; the same results (emulated sm_90a, both the causal kernel's
    loops; at 128x128 the diagonal loop has one iteration)."""
    Z, H, N, D = 1, 2, 256, 32
    q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
    BM, BN, warps, stages = config
    o, lse, compiled = _forward_through_descriptors(q, k, v, causal, BM, BN, warps, stages, warp_specialize=True)
    tgir = compiled.asm["tgir"]
    assert "warp_role" in tgir
    # two consumer warpgroups take turns at their dots (ping-pong): begin, wait, pass, end
    assert tgir.count("warpgroup_turn") == (4 if warps == 8 else 0)
    torch.testing.assert_close(o.double(), reference(q.double(), k.double(), v.double(), causal=causal),
                               atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("on", ["cuda-emulated-sm90"], indirect=True)
@pytest.mark.parametrize("window", [100, 256], ids=["window100", "window256"])
def test_sliding_window_walks_its_span_as_the_dense_loops(on, window):
    """A sliding window has one span per Q block: the forward walks it as its dense loops
    (masked blocks, the full ones on a warp-specialized loop with warpgroup turns, masked
    ones), all three pipelined on TMA; the same results as the dense reference (emulated
    sm_90a, 128x128 blocks over 128-blocks of the mask, 8 warps, 2 stages; a window of
    100 leaves Q blocks with no full block)."""
    Z, H, N, D = 1, 2, 512, 32
    q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
    mask = create_block_mask(mods.sliding_window(window), 1, 1, N, "cpu", q_block=128, kv_block=128)
    o, lse, compiled = _forward_through_descriptors(q, k, v, False, 128, 128, 8, 2, warp_specialize=True,
                                                    block_mask=mask)
    tgir = compiled.asm["tgir"]
    assert "warp_role" in tgir and tgir.count("warpgroup_turn") == 4
    assert tgir.count("mbarrier_init") >= 3 * 2  # a full mbarrier per ring (K and V) of each loop
    want = reference(q.double(), k.double(), v.double(), mask_mod=mods.sliding_window(window))
    torch.testing.assert_close(o.double(), want, atol=2e-3, rtol=2e-3)


def _compile_d128_warp_specialized(BM=128, BN=128, D=128, stages=2):
    """The forward's descriptor path, warp-specialized, compiled for sm_90a (8 warps)."""
    import tegula
    from tegula.backends.compiler import GPUTarget
    from tegula.compiler import ASTSource

    sig = {"q_ptr": f"tensordesc<fp16[{BM}, {D}]>", "k_ptr": f"tensordesc<fp16[{BN}, {D}]>",
           "v_ptr": f"tensordesc<fp16[{BN}, {D}]>", "out_ptr": f"tensordesc<fp16[{BM}, {D}]>", "lse_ptr": "*fp32",
           **{name: "i32" for name in ("stride_z", "stride_h", "stride_n", "stride_d", "H", "N_CTX", "ZH")}}
    constants = dict(sparse=(), SCORE_MOD=None, score_args=(), MASK_MOD=None, mask_args=(), HEAD_DIM=D,
                     SM_SCALE=D ** -0.5, CAUSAL=True, SPARSE=False, SPARSE_Q=1, SPARSE_KV=1, PRECISION="tf32",
                     ON_GPU=True, IN_RANGE=True, DESC=True, BLOCK_M=BM, BLOCK_N=BN, WARP_SPECIALIZE=True)
    sig.update({name: "constexpr" for name in constants})
    attrs = {name: 16 for name in ("lse_ptr", "stride_z", "stride_h", "stride_n", "N_CTX")}
    # the descriptors' base, shape and strides 16-byte divisible, as the launcher finds them
    attrs.update({f"{d}.{i}": 16 for d in ("q_ptr", "k_ptr", "v_ptr", "out_ptr") for i in range(4)})
    return tegula.compile(ASTSource(attention_fwd_kernel, sig, constants, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": stages})


def test_warp_specialized_d128_forward_keeps_its_pipeline():
    """The warp-specialized D128 forward at 128x128 blocks, 2 stages, for sm_90a (compiled
    only): the first loop's rings, allocated before the split and freed after their
    loop, leave their bytes to the second loop's, although the consumers' staged Q sits
    above them (else 299 KB: the compiler fell back to an unpipelined loop on mma.sync,
    110 TFLOP/s on an H200); and the last P·V after the loops, in the consumers'
    region, runs on wgmma with its V staged (no mma.sync, no accumulator conversion)."""
    from tegula.backends.cuda.compiler import read_tgir
    from tegula.backends.cuda.shared_memory import shared_bytes

    tgir = _compile_d128_warp_specialized().asm["tgir"]
    assert "warp_role" in tgir and "smem<2x128x128xf16>" in tgir
    assert "version=2" not in tgir
    assert shared_bytes(read_tgir(tgir, 8)[0]) <= 232448  # an H100's or H200's 227 KB


def test_warpgroup_turns_of_the_d128_forward(monkeypatch):
    """The two consumer warpgroups of the warp-specialized forward take turns at their
    dots (2 stages: the dots are waited for where the softmax reads them, so the loop
    computes on them): a turn passed before the loop, one waited for before the first
    dot and passed after the last, one taken after the loop, on named barriers 2 and 3;
    in the PTX, `bar.sync` / `bar.arrive` with the warpgroup's barrier in a register.
    The tgir text reads back (an override), and a turn the verifier cannot take (one
    warpgroup) is refused. TEGULA_WARPGROUP_PINGPONG=0 leaves them out."""
    import re

    from tegula.backends.cuda.compiler import read_tgir
    from tegula.ir.verifier import VerificationError

    compiled = _compile_d128_warp_specialized()
    tgir, ptx = compiled.asm["tgir"], compiled.asm["ptx"]
    steps = re.findall(r"warpgroup_turn \{step = '(\w+)', barrier = 2, groups = 2\}", tgir)
    assert steps == ["begin", "wait", "pass", "end"]
    body = tgir[tgir.index("step = 'wait'"):tgir.index("step = 'pass'")]
    assert body.count(" = dot ") == 2  # S = Q·K^T and the previous block's P·V, between the two
    assert re.search(r"bar\.sync\s+%r\d+, 256;", ptx) and re.search(r"bar\.arrive\s+%r\d+, 256;", ptx)
    from tegula.ir.ops import Op
    read_back = [ins.attrs.step for ins in read_tgir(tgir, 8)[0].walk() if ins.op is Op.WARPGROUP_TURN]
    assert read_back == ["begin", "wait", "pass", "end"]
    with pytest.raises(VerificationError, match="warpgroup_turn"):
        read_tgir(tgir.replace("groups = 2", "groups = 1"), 8)
    monkeypatch.setenv("TEGULA_WARPGROUP_PINGPONG", "0")
    assert "warpgroup_turn" not in _compile_d128_warp_specialized().asm["tgir"]


def test_turns_around_a_barrier_are_dropped():
    """A loop whose consumers must all meet between a turn's wait and its pass (here a
    barrier put there by hand) would deadlock: the warpgroup holding the turn waits at
    the barrier for the one waiting for the turn (seen in the emulator on an earlier
    version of the forward, whose last loop moved a tile through shared memory there).
    `drop_blocked_turns` removes that loop's four turns; the kernel as compiled keeps
    them."""
    from tegula.backends.cuda.compiler import read_tgir
    from tegula.backends.cuda.warpgroup_turns import drop_blocked_turns
    from tegula.ir.ops import Op

    tgir = _compile_d128_warp_specialized().asm["tgir"]
    assert drop_blocked_turns(read_tgir(tgir, 8)[0]) == 0
    lines = tgir.splitlines()
    at = next(i for i, line in enumerate(lines) if "step = 'wait'" in line)
    blocked = "\n".join(lines[:at + 1] + [lines[at].split("warpgroup_turn")[0] + "barrier"] + lines[at + 1:])
    kernel = read_tgir(blocked, 8)[0]
    assert drop_blocked_turns(kernel) == 1
    assert not any(ins.op is Op.WARPGROUP_TURN for ins in kernel.walk())


@pytest.mark.parametrize("on", ["cuda-emulated-sm90"], indirect=True)
@pytest.mark.parametrize("case", ["dense", "causal", "window200"])
def test_one_loop_walks_masked_and_full_blocks_on_one_pipeline(on, case):
    """ONE_LOOP (a config's): every visited block on one warp-specialized loop, the
    masked ones (the causal diagonal, a window's edges) told apart at run time: one
    pipelined loop in the consumers (a dense kernel ignores it) (plus the producer's), its warpgroup turns, and the
    same results (emulated sm_90a, 128x128 blocks, 8 warps, 2 stages)."""
    Z, H, N, D = 1, 2, 512 if case.startswith("window") else 384, 32
    q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
    mask_mod, block_mask = None, None
    if case.startswith("window"):
        mask_mod = mods.sliding_window(int(case.removeprefix("window")))
        block_mask = create_block_mask(mask_mod, 1, 1, N, "cpu", q_block=128, kv_block=128)
    o, lse, compiled = _forward_through_descriptors(q, k, v, case == "causal", 128, 128, 8, 2,
                                                    warp_specialize=True, block_mask=block_mask, one_loop=True)
    tgir = compiled.asm["tgir"]
    # the producer's loop and one consumer loop (a dense kernel in range has no tail loop)
    assert tgir.count(" = for ") == 2 and tgir.count("warpgroup_turn") == 4
    want = reference(q.double(), k.double(), v.double(), causal=case == "causal", mask_mod=mask_mod)
    torch.testing.assert_close(o.double(), want, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("on", ["cuda-emulated-sm90"], indirect=True)
@pytest.mark.parametrize("case", ["dense", "causal", "window100"])
@pytest.mark.parametrize("config", [(64, 64, 4, 3), (128, 128, 8, 2)], ids=["64x64s3w4", "128x128s2w8"])
def test_persistent_forward_turns_its_rings_across_tiles(on, case, config):
    """PERSISTENT (a config's): fewer programs than tiles, each walking tiles round robin
    around the warp-specialized loop, whose rings are allocated once, before the loop
    over tiles, their slots and phases carried from one tile to the next (the producer
    fills the next tile's first slots while the consumers finish this one). The tiles'
    loops have different trip counts (causal: none for the first Q block, where the
    ring must stay where it was), so the slots each tile starts at vary; the same
    results as the dense reference (emulated sm_90a). A sliding window of 100 (one span
    per Q block, some with no full block) loads its block mask's spans per tile, after
    the last tile's output stores, which a producer must not run ahead of: its
    persistent kernel stays unspecialized, the same results."""
    Z, H, N, D = 1, 3, 256, 32
    q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
    BM, BN, warps, stages = config
    tiles = N // BM * Z * H
    causal, mask_mod, block_mask = case == "causal", None, None
    if case == "window100":
        mask_mod = mods.sliding_window(100)
        block_mask = create_block_mask(mask_mod, 1, 1, N, "cpu", q_block=128, kv_block=128)
    o, lse, compiled = _forward_through_descriptors(q, k, v, causal, BM, BN, warps, stages, warp_specialize=True,
                                                    block_mask=block_mask, one_loop=block_mask is not None,
                                                    programs=tiles // 2 - 1)
    tgir = compiled.asm["tgir"]
    # the split (and the rings before it) at the kernel's top level, the tile loop in both partitions
    top = [line for line in tgir.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    specialized = case != "window100"
    assert any("warp_role" in line for line in top) == specialized
    if specialized:
        assert not any(" for " in line for line in top)
        assert tgir.count("warpgroup_turn") == (4 if warps == 8 else 0)
    want = reference(q.double(), k.double(), v.double(), causal=causal, mask_mod=mask_mod)
    torch.testing.assert_close(o.double(), want, atol=2e-3, rtol=2e-3)
    if case != "window100":
        s = (q.double() @ k.double().transpose(-1, -2)) * D ** -0.5
        if causal:
            s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1) / math.log(2), atol=1e-4, rtol=1e-4)
