"""Matrix multiplication: fp16 inputs, fp32 accumulation, fused activation, autotuned.

Each program computes one BLOCK_SIZE_M x BLOCK_SIZE_N tile of C = act(A @ B), walking
K in BLOCK_SIZE_K steps with `tl.dot` accumulating in float32. Programs are numbered in
groups of GROUP_SIZE_M tile-rows ("grouped ordering"), so programs that run at the same
time share rows of A and columns of B in the L2 cache. The activation is picked at
compile time by the constexpr string ACTIVATION ("leaky_relu" or "" for none): the
untaken branch is never compiled. On a GPU the kernel is autotuned over ten configs;
on the CPU one small config is used (autotuning the interpreter would only measure it).

    python examples/03_matmul.py [--m M --n N --k K] [--activation leaky_relu] [--small]
"""
import argparse
import sys

try:
    import torch
except ModuleNotFoundError:  # the examples are standalone scripts: say what is missing
    raise SystemExit("this example compares against PyTorch: pip install -e '.[test]' "
                     "(or pip install torch)") from None

import tegula as triton
import tegula.language as tl

ON_GPU = torch.cuda.is_available()


def matmul_configs():
    if not ON_GPU:
        return [triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
                              num_warps=4, num_stages=3)]
    shapes = [  # (BM, BN, BK, stages, warps)
        (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 8), (128, 128, 64, 4, 4),
        (64, 256, 32, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 128, 32, 4, 4),
        (64, 64, 64, 4, 4), (64, 64, 32, 5, 2),
    ]
    return [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8},
                          num_stages=s, num_warps=w) for bm, bn, bk, s, w in shapes]


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.autotune(configs=matmul_configs(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    # Grouped ordering: consecutive program ids sweep GROUP_SIZE_M tile-rows column by
    # column before moving on, instead of one whole tile-row at a time.
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    programs_per_group = GROUP_SIZE_M * tiles_n
    group = pid // programs_per_group
    group_first_m = group * GROUP_SIZE_M
    group_rows = min(tiles_m - group_first_m, GROUP_SIZE_M)
    tile_m = group_first_m + (pid % programs_per_group) % group_rows
    tile_n = (pid % programs_per_group) // group_rows

    # Rows past M and columns past N wrap around (modulo) instead of being masked: the
    # loads stay in bounds and unmasked, and the store below drops those lanes.
    rows = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k * BLOCK_SIZE_K  # the last K step is partial: mask it with zeros
        a = tl.load(a_ptrs, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    c = acc.to(tl.float16)

    out_rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


def matmul(a, b, activation=""):
    """act(a @ b) in float16 for float16 matrices a (M x K) and b (K x N)."""
    assert a.shape[1] == b.shape[0], "inner dimensions differ"
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), ACTIVATION=activation)
    return c


def reference(a, b, activation):
    c = a.double() @ b.double()
    if activation == "leaky_relu":
        c = torch.where(c >= 0, c, 0.01 * c)
    return c


def main(m=None, n=None, k=None, activations=("", "leaky_relu"), small=False):
    """Multiply random fp16 matrices with each activation; True when all match."""
    device = "cuda" if ON_GPU else "cpu"
    big = ON_GPU and not small
    # Not multiples of the blocks; on the GPU still multiples of 16 elements, since rows
    # whose starts are not 16-byte aligned rule out vector loads (~10x slower).
    m, n, k = m or (4000 if big else 67), n or (4000 if big else 45), k or (4000 if big else 83)
    a = torch.randn((m, k), device=device, dtype=torch.float16)
    b = torch.randn((k, n), device=device, dtype=torch.float16)
    ok = True
    for activation in activations:
        c = matmul(a, b, activation)
        expected = reference(a, b, activation)
        err = (c.double() - expected).abs().max().item()
        try:  # fp16 output: one rounding of values of size ~sqrt(K)
            triton.testing.assert_close(c.double(), expected, atol=1e-2, rtol=1e-2)
            good = True
        except AssertionError:
            good = False
        ok &= good
        print(f"matmul {m}x{k} @ {k}x{n} fp16 (fp32 accumulation), activation={activation or 'none'!r} "
              f"on {device}: max abs error {err:.3g} -> {'OK' if good else 'MISMATCH'}")
    if ON_GPU:
        tuned = len(getattr(matmul_kernel, "configs_timings", {}))
        seconds = getattr(matmul_kernel, "bench_time", 0.0)  # absent when loaded from the disk cache
        print(f"autotuning: best config {matmul_kernel.best_config} ({tuned} configs, {seconds:.2f}s)")
    ms = triton.testing.do_bench(lambda: matmul(a, b))
    print(f"time: {ms:.4f} ms per call, {2 * m * n * k / ms / 1e9:.3g} TFLOP/s")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=None)
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--activation", choices=["", "leaky_relu"], default=None,
                        help="check only this activation (default: both)")
    parser.add_argument("--small", action="store_true", help="a small, fast run (CPU interpreter)")
    args = parser.parse_args()
    acts = ("", "leaky_relu") if args.activation is None else (args.activation,)
    sys.exit(0 if main(args.m, args.n, args.k, acts, small=args.small) else 1)
