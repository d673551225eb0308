"""Pipelining of gather GEMMs: dot operands whose rows are addressed by indices loaded
in the same loop (a MoE weight-gradient kernel, liger-kernel's `_moe_bwd_dW1_kernel`:
`x_ptr + token_idx[:, None] * stride`, `token_idx` loaded each iteration). The index
load joins the address code: its copy for iteration k+S-1 runs with that iteration's
cp.async copies, masked off past the loop's end. Checked by translation validation on
the interpreter, on the emulator at capabilities 80 and 90 against float64 products
(expert row counts that are not multiples of the block, one of them empty), and with
an index array exactly as long as the loop reads (the guard keeps the iteration after
the last from reading past it)."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_runner import has_torch_gpu
from test_pipeline_loops import ops, tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.backends.cuda.pipeline_loops import pipeline_loops
from tegula.backends.interpreter import execute
from tegula.ir.clone import clone_kernel
from tegula.ir.ops import Op


@tegula.jit
def gathered_weight_grad(x_ptr, d_ptr, idx_ptr, starts_ptr, out_ptr, stride_x, stride_d, H, N,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, MASK_INDEX: tl.constexpr):
    """out[e] = d[rows of e]^T @ x[idx[rows of e]] (one program per expert and tile)."""
    e = tl.program_id(0)
    start = tl.load(starts_ptr + e)
    rows = tl.load(starts_ptr + e + 1) - start
    hs = tl.program_id(1) * BM + tl.arange(0, BM)
    ns = tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for k in range(0, rows, BK):
        in_rows = k + ks < rows
        if MASK_INDEX:
            token = tl.load(idx_ptr + start + k + ks, mask=in_rows, other=0)
        else:  # every expert's row count a multiple of BK: the indices read are all there
            token = tl.load(idx_ptr + start + k + ks)
        x = tl.load(x_ptr + token[:, None] * stride_x + hs[None, :], mask=in_rows[:, None] & (hs[None, :] < H),
                    other=0.0)
        d = tl.load(d_ptr + (start + k + ks)[:, None] * stride_d + ns[None, :],
                    mask=in_rows[:, None] & (ns[None, :] < N), other=0.0)
        acc = tl.dot(tl.trans(d), x, acc)
    out = out_ptr + e * N * H + ns[:, None] * H + hs[None, :]
    tl.store(out, acc, mask=(ns[:, None] < N) & (hs[None, :] < H))


SIG = {"x_ptr": "*fp16", "d_ptr": "*fp16", "idx_ptr": "*i32", "starts_ptr": "*i32", "out_ptr": "*fp32",
       "stride_x": "i32", "stride_d": "i32", "H": "i32", "N": "i32", "BM": "constexpr", "BN": "constexpr",
       "BK": "constexpr", "MASK_INDEX": "constexpr"}
ALIGNED = {"x_ptr": 16, "d_ptr": 16, "idx_ptr": 16, "out_ptr": 16, "stride_x": 16, "stride_d": 16}


def gather_ir(mask_index=True, stages=3):
    cx = {"BM": 64, "BN": 64, "BK": 32, "MASK_INDEX": mask_index}
    return tir_opt(gathered_weight_grad, SIG, cx, num_stages=stages, attrs=ALIGNED)


def gather_args(kernel, counts, rng, H=112, N=48):
    """Arguments (in `kernel.args` order) and the float64 reference: experts with
    `counts` rows each, gathering rows of a 97-row x in a random order."""
    T = 97
    x = rng.standard_normal((T, 128)).astype(np.float16)  # row stride 128, H of it used
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    idx = rng.integers(0, T, size=int(starts[-1])).astype(np.int32)  # exactly as long as read
    d = rng.standard_normal((int(starts[-1]), 64)).astype(np.float16)
    out = np.full((len(counts), N, H), np.nan, np.float32)
    want = np.stack([d[a:b, :N].astype(np.float64).T @ x[idx[a:b], :H].astype(np.float64)
                     for a, b in zip(starts[:-1], starts[1:])])
    values = {"x_ptr": x, "d_ptr": d, "idx_ptr": idx, "starts_ptr": starts, "out_ptr": out,
              "stride_x": 128, "stride_d": 64, "H": H, "N": N}
    return [values[n] for n in kernel.arg_names], out, want


def test_index_loads_join_the_address_code():
    kernel = clone_kernel(gather_ir())
    assert pipeline_loops(kernel, 3, 4, 90) == 1
    loop = next(i for i in kernel.walk() if i.op is Op.FOR)
    body = [i.op for i in loop.regions[0].walk()]
    assert body.count(Op.ASYNC_COPY) == 2  # x and d, copied ahead
    assert body.count(Op.LOAD) == 1         # the indices of the iteration they address


@pytest.mark.parametrize("stages", [2, 3])
def test_translation_validation_on_the_interpreter(stages):
    """Bit-identical outputs before and after the rewrite (copies complete at issue)."""
    before = gather_ir(stages=stages)
    after = clone_kernel(before)
    assert pipeline_loops(after, stages, 4, 80) == 1
    outs = []
    for kernel in (before, after):
        args, out, _ = gather_args(kernel, [70, 0, 33, 96], np.random.default_rng(stages))
        execute(kernel, (4, 2, 1), args)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("stages", [2, 3])
def test_gather_gemm_on_the_emulator(capability, stages):
    kernel = gather_ir(stages=stages)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=stages)
    assert Op.ASYNC_COPY in ops(ek.lowering.kernel)
    args, out, want = gather_args(kernel, [70, 0, 33, 96], np.random.default_rng(capability + stages))
    ek.run((4, 2, 1), args)
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)


def test_unmasked_indices_are_not_read_past_the_loop():
    """Row counts multiples of BK and an unmasked index load: the copies of the
    iterations after the last would read the index array past its end (the
    interpreter reports that) unless their index load is masked off."""
    kernel = clone_kernel(gather_ir(mask_index=False))
    assert pipeline_loops(kernel, 3, 4, 90) == 1
    args, out, want = gather_args(kernel, [64, 32, 96], np.random.default_rng(3))
    execute(kernel, (3, 2, 1), args)
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)


def test_a_loop_writing_its_index_array_is_left_alone():
    """Each iteration rewrites the indices the next one reads: read S-1 iterations
    early, they would be stale."""

    @tegula.jit
    def rewrites_indices(x_ptr, idx_ptr, out_ptr, K, BK: tl.constexpr):
        ks, cols = tl.arange(0, BK), tl.arange(0, 32)
        acc = tl.zeros((32, 32), dtype=tl.float32)
        for k in range(0, K, BK):
            token = tl.load(idx_ptr + k + ks)
            x = tl.load(x_ptr + token[:, None] * 32 + cols[None, :])
            acc = tl.dot(tl.trans(x), x, acc)
            tl.store(idx_ptr + k + BK + ks, token)
        tl.store(out_ptr + cols[:, None] * 32 + cols[None, :], acc)

    sig = {"x_ptr": "*fp16", "idx_ptr": "*i32", "out_ptr": "*fp32", "K": "i32", "BK": "constexpr"}
    kernel = clone_kernel(tir_opt(rewrites_indices, sig, {"BK": 32}))
    assert pipeline_loops(kernel, 3, 4, 90) == 0


@pytest.mark.skipif(not has_torch_gpu(), reason="no CUDA GPU")
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("mask_index", [True, False])
def test_gather_gemm_on_the_gpu(stages, mask_index):
    import torch
    gen = torch.Generator(device="cuda").manual_seed(stages)
    counts = [70, 0, 33, 96] if mask_index else [64, 32, 96]
    T, H, N = 97, 112, 48
    starts = torch.tensor([0] + list(np.cumsum(counts)), dtype=torch.int32, device="cuda")
    rows = int(starts[-1])
    x = torch.randn(T, 128, device="cuda", generator=gen).half()
    d = torch.randn(rows, 64, device="cuda", generator=gen).half()
    idx = torch.randint(0, T, (rows,), device="cuda", generator=gen, dtype=torch.int32)
    out = torch.full((len(counts), N, H), float("nan"), device="cuda")
    gathered_weight_grad[(len(counts), 2)](x, d, idx, starts, out, 128, 64, H, N, BM=64, BN=64, BK=32,
                                           MASK_INDEX=mask_index, num_warps=4, num_stages=stages)
    want = torch.stack([d[a:b, :N].double().T @ x[idx[a:b].long(), :H].double()
                        for a, b in zip(starts[:-1].tolist(), starts[1:].tolist())])
    torch.testing.assert_close(out.double(), want, rtol=2e-3, atol=2e-3)
