"""tegula.kernels.attention end to end: forward and backward (dq, dk, dv) of every variant
against a dense torch reference, on fresh random inputs, with sizes that are not
multiples of the blocks.

Backends: the numpy interpreter runs every variant in float64 (tegula's dot supports
fp64 there, so the comparison is tight and `torch.autograd.gradcheck` runs in fp64) and
some in float32; the CUDA lowering through the host emulator and the compiled CPU
backend run a causal and a masked case at small size; a real GPU, where there is one,
runs every variant in fp16 and three of them in fp32 and bf16 (16-bit results are judged
against torch's own 16-bit error).
"""
import math

import pytest

torch = pytest.importorskip("torch")

import tegula as triton
import tegula.language as tl
from tegula.kernels import BlockMask, MaskMod, ScoreMod, attention, create_block_mask, mods
from tegula.kernels.attention_bwd import (  # noqa: F401  (the `on` fixture clears their caches)
    attention_bwd_dkdv_kernel,
    attention_bwd_dq_kernel,
    attention_bwd_preprocess,
)
from tegula.kernels.attention_common import causal_tile
from tegula.kernels.attention_fwd import _block_m_of, attention_fwd_kernel  # noqa: F401
from tegula.kernels.flex import _block_states_kernel  # noqa: F401


def index_grids(Z, H, N, device):
    return (torch.arange(Z, device=device).view(Z, 1, 1, 1), torch.arange(H, device=device).view(1, H, 1, 1),
            torch.arange(N, device=device).view(1, 1, N, 1), torch.arange(N, device=device).view(1, 1, 1, N))


def reference(q, k, v, causal=False, score_mod=None, mask_mod=None, block_mask=None, sm_scale=None):
    """Dense softmax attention in torch with the mods' torch references; rows where
    nothing attends give 0, as the kernels do."""
    Z, H, N, D = q.shape
    b, h, qi, ki = index_grids(Z, H, N, q.device)
    s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D) if sm_scale is None else sm_scale)
    if score_mod is not None:
        # a bias built from int indices promotes to float32; the math stays in q's dtype
        s = score_mod.reference(s, b, h, qi, ki).to(s.dtype)
    mask_mod = mask_mod or (block_mask.mask_mod if block_mask is not None else None)
    causal = causal or (block_mask is not None and block_mask.causal)
    allowed = torch.ones((1, 1, N, N), dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed & (qi >= ki)
    if mask_mod is not None:
        allowed = allowed & mask_mod.reference(b, h, qi, ki)
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.nan_to_num(p, nan=0.0) @ v


def random_doc_ids(N, device, docs=4):
    """Per-token document ids of `docs` packed documents of random lengths."""
    cuts = torch.sort(torch.randperm(N - 1)[: docs - 1] + 1).values.tolist()
    ids = torch.zeros(N, dtype=torch.int32)
    for c in cuts:
        ids[c:] += 1
    return ids.to(device)


def random_band_mask(Z, H, N, device):
    """A different random mask per (b, h): a band with random holes, the diagonal kept,
    so some blocks are empty, some partial."""
    q, kv = torch.arange(N).view(N, 1), torch.arange(N).view(1, N)
    band = (q - kv).abs() < N // 3
    return ((band & (torch.rand(Z, H, N, N) < 0.7)) | (q == kv)).to(device)


# name -> kwargs of attention() for (Z, H, N, device); fresh random data per call
VARIANTS = {
    "dense": lambda Z, H, N, dev: {},
    "causal": lambda Z, H, N, dev: dict(causal=True),
    "sliding_window": lambda Z, H, N, dev: dict(mask_mod=mods.sliding_window(N // 4 + 1)),
    "sliding_window_bidirectional": lambda Z, H, N, dev: dict(mask_mod=mods.sliding_window(N // 5 + 2, causal=False)),
    "document_causal": lambda Z, H, N, dev: dict(mask_mod=mods.document(random_doc_ids(N, dev)), causal=True),
    "alibi_causal": lambda Z, H, N, dev: dict(score_mod=mods.alibi(mods.alibi_slopes(H, dev)), causal=True),
    "relative_position": lambda Z, H, N, dev: dict(score_mod=mods.relative_position(0.05)),
    "softcap": lambda Z, H, N, dev: dict(score_mod=mods.softcap(1.5), sm_scale=1.0),
    "dense_tensor_mask": lambda Z, H, N, dev: dict(block_mask=BlockMask.from_dense(random_band_mask(Z, H, N, dev))),
    "softcap_document_block_mask": lambda Z, H, N, dev: dict(
        score_mod=mods.softcap(2.0),
        block_mask=create_block_mask(mods.document(random_doc_ids(N, dev)), 1, 1, N, dev, causal=True)),
}
TOLERANCE = {torch.float64: 1e-9, torch.float32: 2e-4}


def check_variant(name, Z, H, N, D, dtype, device):
    kwargs = VARIANTS[name](Z, H, N, device)
    q, k, v = (torch.randn(Z, H, N, D, dtype=dtype, device=device, requires_grad=True) for _ in range(3))
    out = attention(q, k, v, **kwargs)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    expected = reference(q64, k64, v64, **kwargs)
    expected.backward(d_out.double())
    results = (("out", out, expected), ("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad))
    if dtype in (torch.float16, torch.bfloat16):
        # 16-bit inputs: no worse than twice the error of the same math done by torch in
        # that dtype (FlexAttention's own test criterion), against the float64 result
        ql, kl, vl = (t.detach().clone().requires_grad_() for t in (q, k, v))
        low = reference(ql, kl, vl, **kwargs)
        low.backward(d_out)
        for (what, got, want), ref_low in zip(results, (low, ql.grad, kl.grad, vl.grad)):
            err, err_low = (got.double() - want).abs().max().item(), (ref_low.double() - want).abs().max().item()
            assert err <= 2 * err_low + 1e-3, f"{name} {what}: max error {err:.3g}, torch {dtype} {err_low:.3g}"
        return
    tol = TOLERANCE[dtype]
    for what, got, want in results:
        torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol, msg=lambda m: f"{name} {what}: {m}")


# Sizes cycle through lengths that are not multiples of the blocks (16/32 on the host).
SIZES = [(1, 2, 40, 16), (1, 2, 77, 32), (2, 1, 100, 16)]


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_fp64_interpreter(on, name):
    Z, H, N, D = SIZES[list(VARIANTS).index(name) % len(SIZES)]
    check_variant(name, Z, H, N, D, torch.float64, "cpu")


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
@pytest.mark.parametrize("N, D", [(1, 16), (16, 64), (64, 16)])
@pytest.mark.parametrize("name", ["dense", "causal", "sliding_window"])
def test_edge_lengths(on, name, N, D):
    """A single token, one whole block, whole sparse blocks only (no tail to mask)."""
    check_variant(name, 1, 2, N, D, torch.float64, "cpu")


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
def test_causal_heads_past_one_group(on):
    """More heads than one group of `causal_tile` holds (140 heads of 2 Q blocks: 128
    and a partial group of 12), forward and backward."""
    check_variant("causal", 2, 70, 40, 16, torch.float64, "cpu")


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
@pytest.mark.parametrize("name", ["causal", "document_causal", "softcap"])
def test_variant_fp32_interpreter(on, name):
    check_variant(name, 1, 2, 61, 32, torch.float32, "cpu")


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["causal", "softcap_document_block_mask"])
def test_variant_16bit_interpreter(on, name, dtype):
    """fp16/bf16 inputs with fp32 accumulation, judged against torch's own 16-bit error."""
    check_variant(name, 1, 2, 70, 32, dtype, "cpu")


@pytest.mark.parametrize("on", ["cuda-emulated", "cpu"], indirect=True)
@pytest.mark.parametrize("name", ["causal", "sliding_window"])
def test_variant_compiled_host_backends(on, name):
    check_variant(name, 1, 1, 40, 16, torch.float32, "cpu")


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
@pytest.mark.parametrize("name", ["causal", "sliding_window", "softcap_document_block_mask"])
def test_descriptor_path_variants(on, name):
    """fp16 inputs whose length is a multiple of 128 take the forward's descriptor path
    (the [Z*H*N, D] rows read through tensor descriptors), dense and block-sparse."""
    check_variant(name, 1, 2, 128, 16, torch.float16, "cpu")


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
def test_inputs_tma_cannot_take_use_the_pointer_path(on):
    """Which inputs the forward reads by descriptor: fp16 rows of a length that is a
    multiple of 128 in 16-byte aligned storage; a length of 120, fp32, or storage two
    bytes off alignment take the pointer path, with the same results."""
    import importlib

    library = importlib.import_module("tegula.kernels.attention")
    Z, H, N, D = 1, 2, 128, 16
    q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
    assert library.forward_descriptors_apply(q, k, v, q)
    assert not library.forward_descriptors_apply(q[:, :, :120].contiguous(), k, v, q)
    assert not library.forward_descriptors_apply(q.float(), k.float(), v.float(), q.float())
    off = torch.empty(q.numel() + 1, dtype=torch.float16)[1:].view(q.shape)  # contiguous, 2 bytes off
    off.copy_(q)
    assert off.is_contiguous() and off.data_ptr() % 16 == 2
    assert not library.forward_descriptors_apply(off, k, v, q)
    want = reference(q.double(), k.double(), v.double(), causal=True)
    for inputs in ((q, k, v), (off, k, v)):
        got = attention(*inputs, causal=True)
        torch.testing.assert_close(got.double(), want, atol=2e-3, rtol=2e-3)


@pytest.fixture
def one_gpu_config(monkeypatch):
    """One GPU config per kernel (128 x 64 blocks, 3 stages, 8 warps; the test is about
    results, and autotuning every variant and dtype would compile hundreds of kernels)."""
    import importlib

    # the module, not the `attention` function the package re-exports under its name
    module = importlib.import_module("tegula.kernels.attention")

    def keep(c):
        blocks = sorted((c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]))
        return blocks[1] <= 32 or (blocks == [64, 128] and c.num_stages == 3 and c.num_warps == 8)
    for kernel in (module._fwd, module._dkdv, module._dq):
        monkeypatch.setattr(kernel, "configs", [c for c in kernel.configs if keep(c)])


GPU_CASES = ([(name, torch.float16) for name in VARIANTS]
             + [(name, dtype) for name in ("causal", "dense_tensor_mask", "softcap_document_block_mask")
                for dtype in (torch.float32, torch.bfloat16)])


@pytest.mark.parametrize("on", ["cuda"], indirect=True)
@pytest.mark.parametrize("name, dtype", GPU_CASES)
def test_variant_gpu(on, name, dtype, one_gpu_config):
    check_variant(name, 2, 3, 300, 64, dtype, "cuda")


@pytest.mark.parametrize("on", ["cuda"], indirect=True)
@pytest.mark.parametrize("name", ["dense", "causal", "sliding_window", "alibi_causal", "softcap_document_block_mask"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_variant_gpu_descriptor_path(on, name, dtype, one_gpu_config):
    """A length that is a multiple of every block: the forward reads Q, K, V by TMA and
    stores O by TMA, and no kernel masks bounds."""
    check_variant(name, 2, 3, 384, 64, dtype, "cuda")


@pytest.fixture
def persistent_gpu_config(one_gpu_config, monkeypatch):
    """The forward narrowed to its persistent warp-specialized config at 128x128 blocks,
    2 stages, 8 warps (the backward as `one_gpu_config` leaves it)."""
    import importlib

    from tegula.kernels.attention_configs import FWD_GPU, FWD_HOST

    module = importlib.import_module("tegula.kernels.attention")
    twin = [c for c in FWD_GPU if c.kwargs.get("PERSISTENT") and c.kwargs["BLOCK_N"] == 128]
    assert len(twin) == 1 and twin[0].kwargs["WARP_SPECIALIZE"] and twin[0].num_stages == 2
    monkeypatch.setattr(module._fwd, "configs", FWD_HOST + [twin[0]])


@pytest.mark.parametrize("on", ["cuda"], indirect=True)
@pytest.mark.parametrize("name", ["dense", "causal", "alibi_causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_variant_gpu_persistent_forward(on, name, D, persistent_gpu_config):
    """The persistent forward on the GPU: more tiles (3 Q blocks x 80 heads) than SMs,
    so each program walks several, its rings turning across them (Hopper: a producer
    warpgroup runs ahead into the next tile)."""
    check_variant(name, 4, 20, 384, D, torch.float16, "cuda")


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
@pytest.mark.parametrize("name", ["causal", "document_causal", "softcap"])
def test_gradcheck_fp64(on, name):
    Z, H, N, D = 1, 1, 19, 16
    kwargs = VARIANTS[name](Z, H, N, "cpu")
    inputs = tuple(torch.randn(Z, H, N, D, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda q, k, v: attention(q, k, v, **kwargs), inputs, fast_mode=True)


@triton.jit
def _add_index(x, i):
    return x + i


@triton.jit
def _add_loaded(x, i, table, scale):
    return x + tl.load(table + i) * scale


@triton.jit
def _apply_mod(x_ptr, out_ptr, n, MOD: tl.constexpr, mod_args, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, MOD(x, offs, *mod_args), mask=offs < n)


@pytest.mark.parametrize("on", ["interpreter", "cuda-emulated"], indirect=True)
def test_jit_function_as_constexpr_argument_with_extra_arguments(on):
    """What the mods rest on: a @jit function passed as a constexpr argument and called
    in the kernel with a tuple of extra arguments unpacked after its own; each function
    gets its own compiled kernel."""
    n = 50
    x, table = torch.randn(n), torch.randn(64)  # the mod reads a whole block of it
    out = torch.empty(n)
    _apply_mod[(1,)](x, out, n, _add_index, (), BLOCK=64)
    torch.testing.assert_close(out, x + torch.arange(n))
    _apply_mod[(1,)](x, out, n, _add_loaded, (table, 0.5), BLOCK=64)
    torch.testing.assert_close(out, x + table[:n] * 0.5)


@triton.jit
def _strictly_before(b, h, q_idx, kv_idx):
    return kv_idx < q_idx


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
def test_rows_with_nothing_to_attend_give_zero(on):
    """Query 0 sees no key under `kv < q`: its output and gradients are 0, not NaN."""
    mask = MaskMod(_strictly_before, (), lambda b, h, q, kv: kv < q)
    q, k, v = (torch.randn(1, 2, 45, 16, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = attention(q, k, v, mask_mod=mask)
    assert torch.all(out[:, :, 0] == 0)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    q64, k64, v64 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    reference(q64, k64, v64, mask_mod=mask).backward(d_out)
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9)


@triton.jit
def _scaled(score, b, h, q_idx, kv_idx, factor):
    return score * factor


@triton.jit
def _scaled_grad(score, b, h, q_idx, kv_idx, factor):
    return factor + 0.0 * score


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
def test_user_score_mod_with_its_gradient(on):
    """A score_mod written by the user, with the derivative rule they give."""
    factor = 0.75  # exact in fp32, the type of float scalar arguments
    mod = ScoreMod(_scaled, _scaled_grad, (factor,), lambda s, b, h, q, kv: s * factor)
    q, k, v = (torch.randn(1, 1, 50, 16, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = attention(q, k, v, causal=True, score_mod=mod)
    out.sum().backward()
    q64, k64, v64 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    reference(q64, k64, v64, causal=True, score_mod=mod).sum().backward()
    for got, want in ((out, reference(q64, k64, v64, causal=True, score_mod=mod)), (q.grad, q64.grad),
                      (k.grad, k64.grad), (v.grad, v64.grad)):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
def test_score_mod_without_gradient_rule_is_forward_only(on):
    q, k, v = (torch.randn(1, 1, 20, 16, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mod = ScoreMod(_scaled, None, (0.5,), lambda s, b, h, qi, ki: s * 0.5)
    out = attention(q, k, v, score_mod=mod)
    torch.testing.assert_close(out, reference(q, k, v, score_mod=mod), atol=1e-9, rtol=1e-9)
    with pytest.raises(NotImplementedError, match="no gradient rule"):
        out.sum().backward()


def test_spans_hold_at_most_one_full_run():
    """Visited runs become spans of the form partial* full* partial*: a second full run
    starts a new span, so the kernels mask only partial blocks."""
    from tegula.kernels.flex import FULL, PARTIAL, _spans
    E, P, F = 0, PARTIAL, FULL
    rows = {(P, F, F, F, P, E, E): [(0, 1, 4, 5)],
            (E, P, P, E, F, F, E): [(1, 1, 1, 3), (4, 4, 6, 6)],
            (F, F, P, F, F, P, P): [(0, 0, 2, 3), (3, 3, 5, 7)],
            (E,) * 7: [],
            (P, F, P, F, P, E, F): [(0, 1, 2, 3), (3, 3, 4, 5), (6, 6, 7, 7)]}
    states = torch.tensor(list(rows), dtype=torch.int8).view(1, 1, len(rows), 7)
    count, first, full_first, full_end, end = (t[0, 0] for t in _spans(states))
    for i, want in enumerate(rows.values()):
        got = [(int(first[i, r]), int(full_first[i, r]), int(full_end[i, r]), int(end[i, r]))
               for r in range(int(count[i]))]
        assert got == want


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
def test_block_mask_matches_dense_evaluation(on):
    """The block states from the tegula kernel equal those of the torch reference mask,
    and a sliding window visits the expected fraction of blocks."""
    N, window = 150, 20
    mask = mods.sliding_window(window)
    bm = create_block_mask(mask, 1, 1, N, "cpu", q_block=32, kv_block=32)
    _, _, qi, ki = index_grids(1, 1, N, "cpu")
    dense = (mask.reference(None, None, qi, ki) & (qi >= ki))[0, 0]
    n_blk = triton.cdiv(N, 32)
    padded = torch.zeros(n_blk * 32, n_blk * 32, dtype=torch.bool)
    padded[:N, :N] = dense
    per_block = padded.view(n_blk, 32, n_blk, 32).sum(dim=(1, 3))
    full = per_block == 32 * 32
    partial = (per_block > 0) & ~full
    assert torch.equal(bm.full_kv_num_blocks[0, 0], full.sum(1).int())
    assert torch.equal(bm.kv_num_blocks[0, 0], partial.sum(1).int())
    assert torch.equal(bm.q_num_blocks[0, 0], partial.sum(0).int())
    for row in range(n_blk):
        for got, flags in ((bm.kv_indices, partial[row]), (bm.full_kv_indices, full[row])):
            assert got[0, 0, row, :int(flags.sum())].tolist() == torch.nonzero(flags).flatten().tolist()
    # the spans the kernels walk cover exactly the listed blocks, masking the partial ones
    count, first, full_first, full_end, end = (t[0, 0] for t in bm.kernel_args(1, 1, transposed=False)[:5])
    for row in range(n_blk):
        masked, unmasked = [], []
        for r in range(int(count[row])):
            for b in range(int(first[row, r]), int(end[row, r])):
                (unmasked if full_first[row, r] <= b < full_end[row, r] else masked).append(b)
        assert masked == torch.nonzero(partial[row]).flatten().tolist()
        assert unmasked == torch.nonzero(full[row]).flatten().tolist()
        # a sliding window's visited blocks are consecutive: one loop for each Q block
        assert int(count[row]) == 1
    assert bm.visited_fraction() == pytest.approx(float((per_block > 0).sum()) / n_blk ** 2)
    assert bm.visited_fraction() < 0.5


@pytest.mark.parametrize("on", ["interpreter"], indirect=True)
def test_block_mask_from_a_dense_torch_mask_matches_the_kernel_evaluation(on):
    """BlockMask.from_dense (block states counted with torch) equals create_block_mask
    evaluating the same mask with the tegula kernel, causal or not."""
    Z, H, N = 2, 3, 70
    allowed = random_band_mask(Z, H, N, "cpu")
    for causal in (False, True):
        by_torch = BlockMask.from_dense(allowed, 32, 32, causal=causal)
        by_kernel = create_block_mask(mods.dense(allowed), Z, H, N, "cpu", causal=causal, q_block=32, kv_block=32)
        assert torch.equal(by_torch.states, by_kernel.states)
        assert 0 < by_torch.visited_fraction() < 1


def test_block_mask_errors_are_named():
    q = torch.randn(1, 1, 40, 16)
    not_causal = create_block_mask(mods.sliding_window(8, causal=False), 1, 1, 40, "cpu")
    with pytest.raises(ValueError, match="build it with causal=True"):
        attention(q, q, q, causal=True, block_mask=not_causal)
    with pytest.raises(ValueError, match="N=40"):
        x = torch.randn(1, 1, 48, 16)
        attention(x, x, x, block_mask=not_causal)
    with pytest.raises(ValueError, match="power of two"):
        x = torch.randn(1, 1, 8, 24)
        attention(x, x, x)


def test_example_08_checks_every_variant(capsys, one_gpu_config):
    """examples/08_attention_variants.py at its small size: every variant matches (on a
    GPU with one config per kernel: autotuning all seven variants took 500 s there)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "examples" / "08_attention_variants.py"
    spec = importlib.util.spec_from_file_location("tegula_example_08", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(small=True)
    out = capsys.readouterr().out
    assert out.count("-> OK") == 7 and "MISMATCH" not in out


def test_pruning_tells_host_and_gpu_configs_apart_by_their_blocks():
    """A caller may narrow an attention kernel's configs or put copies in with other
    kwargs (a benchmark's WARP_SPECIALIZE=True): the pruner keeps them on the GPU by
    their blocks, not by being objects of the tuned list."""
    import copy

    from tegula.kernels.attention_configs import DKDV_GPU, DKDV_PRUNE, FWD_GPU, FWD_HOST, FWD_PRUNE, persistent_twin
    prune = FWD_PRUNE["early_config_prune"]
    call = dict(CAUSAL=True, SPARSE=False, SPARSE_Q=1, SPARSE_KV=1, HEAD_DIM=128, DESC=True)
    ws = copy.copy(FWD_GPU[0])
    ws.kwargs = {**ws.kwargs, "WARP_SPECIALIZE": True}
    assert prune([ws, *FWD_HOST], {"ON_GPU": True}, **call) == [ws]
    assert prune([ws, *FWD_HOST], {"ON_GPU": False}, **call) == FWD_HOST[:1]
    # warp-specialized configs only where the loops specialize: the descriptor path, dense
    twins = [c for c in FWD_GPU if c.kwargs.get("WARP_SPECIALIZE")]
    assert twins and all(c.kwargs["BLOCK_M"] == 128 and c.num_warps == 8 for c in twins)
    assert set(twins) <= set(prune(FWD_GPU, {"ON_GPU": True}, **call))
    assert not set(twins) & set(prune(FWD_GPU, {"ON_GPU": True}, **{**call, "DESC": False}))
    # a persistent twin walks the dense loops only (a block mask's spans load after stores)
    persistent = persistent_twin(twins[0])
    assert persistent in prune([persistent], {"ON_GPU": True}, **call)
    assert not prune([persistent], {"ON_GPU": True}, **{**call, "SPARSE": True, "ONE_SPAN": True})
    # causal needs the outer block (BLOCK_N for dK/dV) to be a multiple of the inner one
    kept = DKDV_PRUNE["early_config_prune"](DKDV_GPU, {"ON_GPU": True}, **call)
    assert kept and all(c.kwargs["BLOCK_N"] % c.kwargs["BLOCK_M"] == 0 for c in kept)
    assert len(kept) < len(DKDV_GPU)


@triton.jit
def _persistent_q_blocks(out_ptr, num_m, programs, tiles):
    for tile in range(0, tiles):
        tl.store(out_ptr + tile, _block_m_of(tile, num_m, programs, True))


@pytest.mark.parametrize("num_m, heads, programs", [(32, 128, 132), (64, 64, 132), (16, 256, 132), (32, 12, 7),
                                                    (10, 9, 4), (8, 6, 16)])
def test_persistent_causal_tiles_pair_light_blocks_with_heavy_ones(num_m, heads, programs):
    """The persistent causal forward's Q-block order (`attention_fwd._block_m_of`): each
    head's blocks once each, and a program's consecutive tiles (`programs` apart) a
    light block and a heavy one, so the programs keep pace and share the heads a round
    of tiles covers (session 19's order gave a program 8-16 light or heavy tiles in a
    row: pairs of sums near 0 or 2 num_m, and at N8192 the programs spread over 23
    heads). Where programs is a multiple of num_m (16 over 8 blocks), every other head
    is walked last block first."""
    import numpy as np

    tiles = num_m * heads
    out = np.full(tiles, -1, np.int32)
    _persistent_q_blocks[(1,)](out, num_m, programs, tiles)
    assert all(sorted(out[h * num_m:(h + 1) * num_m]) == list(range(num_m)) for h in range(heads))
    pairs = [int(out[t] + out[t + programs]) for t in range(tiles - programs)]
    if programs % num_m:
        assert num_m // 2 <= min(pairs) and max(pairs) <= 3 * num_m // 2, (min(pairs), max(pairs))
    else:
        assert all(out[t] + out[t + num_m] == num_m - 1 for t in range(0, tiles - num_m, 2 * num_m))


@triton.jit
def _causal_tiles(out_ptr, COSTLIEST_LAST: tl.constexpr):
    block, head = causal_tile(COSTLIEST_LAST)
    at = 2 * (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0))
    tl.store(out_ptr + at, block)
    tl.store(out_ptr + at + 1, head)


def _finish_time(costs, programs):
    """When the last of `programs` SMs finishes, each taking the next tile when free."""
    import heapq

    free = [0.0] * programs
    for c in costs:
        heapq.heapreplace(free, free[0] + c)
    return max(free)


@pytest.mark.parametrize("costliest_last", [True, False])
@pytest.mark.parametrize("num_blocks, heads", [(32, 128), (64, 64), (16, 40), (3, 200), (300, 2), (1, 5)])
def test_causal_tile_deals_the_costliest_first_a_few_heads_at_a_time(num_blocks, heads, costliest_last):
    """`causal_tile`'s grid order (programs start in linear order, each on the first SM
    free): every (block, head) once; heads taken in groups of about 256 tiles, each
    group's blocks costliest first; and at N4096 and N8192 (32 and 64 blocks a head) a
    scheduler handing tiles out in that order finishes within 1% of the mean load on
    132 SMs, where one head at a time finishes 3% behind it."""
    import numpy as np

    out = np.full((heads, num_blocks, 2), -1, np.int32)
    _causal_tiles[(num_blocks, heads)](out, costliest_last)
    order = out.reshape(-1, 2)
    assert sorted(map(tuple, order.tolist())) == [(b, h) for b in range(num_blocks) for h in range(heads)]
    group = -(-256 // num_blocks)
    cost = order[:, 0] + 1 if costliest_last else num_blocks - order[:, 0]
    for first in range(0, heads, group):
        at = slice(first * num_blocks, min(heads, first + group) * num_blocks)
        assert set(order[at, 1].tolist()) == set(range(first, min(heads, first + group)))
        assert (np.diff(cost[at]) <= 0).all()
    if (num_blocks, heads) in ((32, 128), (64, 64)):
        mean = (cost + 1.4).sum() / 132
        one_head = np.tile(np.arange(num_blocks, 0, -1), heads) + 1.4
        assert _finish_time(cost + 1.4, 132) / mean < 1.01 < 1.02 < _finish_time(one_head, 132) / mean
