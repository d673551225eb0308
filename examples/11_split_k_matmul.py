"""Split-K matmul: C = A @ B for small M and N and a large K, with K cut among programs.

With M and N small there are few output tiles, so one program per tile leaves most of
the GPU idle while each walks a very long K loop. Split-K launches a 2-D grid (tiles,
SPLIT_K): program (t, s) multiplies the s-th slice of K for tile t into an fp32 partial
sum, and the SPLIT_K partials of a tile are added up afterwards, in one of two ways:
  - atomics: each program `tl.atomic_add`s its partial into a zeroed fp32 C. One
    launch, but the order of the additions varies from run to run, so the last bits of
    the result do too (fp32 addition is not associative);
  - workspace: each program stores its partial into its own slice of an fp32
    SPLIT_K x M x N workspace, and a second small kernel adds the slices in a fixed
    order and rounds to C's dtype (here fp16): bit-for-bit repeatable, at the price of
    a second launch and the workspace's memory traffic.
Each slice is a whole number of BLOCK_SIZE_K steps, so slices start on a step boundary;
masks cover K's partial last step and the steps past K that the last slices may get.
The tile sizes are autotuned on a GPU; the atomic kernel names C in `reset_to_zero`,
since every benchmarking run adds into it.

    python examples/11_split_k_matmul.py [--m M --n N --k K --split-k S] [--small]
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


def split_k_configs():
    if not ON_GPU:
        return [triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32}, num_warps=4, num_stages=2)]
    shapes = [(64, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (128, 128, 64, 3, 8),
              (64, 64, 128, 3, 4), (32, 64, 128, 4, 4)]  # (BM, BN, BK, stages, warps)
    return [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk}, num_stages=s, num_warps=w)
            for bm, bn, bk, s, w in shapes]


@triton.jit
def k_slice_partial(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, rows, cols,
                    SPLIT_K: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                    BLOCK_SIZE_K: tl.constexpr):
    """This program's fp32 partial A[rows, slice] @ B[slice, cols] for slice number
    program_id(1) of K."""
    steps_per_slice = tl.cdiv(tl.cdiv(K, BLOCK_SIZE_K), SPLIT_K)
    k_first = tl.program_id(1) * steps_per_slice * BLOCK_SIZE_K
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    ks = k_first + offs_k
    # Rows and columns past the edge wrap around (stay in bounds); the stores drop them.
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(0, steps_per_slice):
        k_left = K - (k_first + step * BLOCK_SIZE_K)  # <= 0 for steps past K: all masked
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    return acc


@triton.autotune(configs=split_k_configs(), key=["M", "N", "K", "SPLIT_K"], reset_to_zero=["c_ptr"])
@triton.jit
def split_k_atomic_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn, SPLIT_K: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                          BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    rows = (tl.program_id(0) // tiles_n) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = (tl.program_id(0) % tiles_n) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    acc = k_slice_partial(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, rows, cols,
                          SPLIT_K, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    # Only the adds need to be atomic, not ordered with anything else: relaxed is enough.
    tl.atomic_add(c_ptrs, acc, mask=(rows[:, None] < M) & (cols[None, :] < N), sem="relaxed")


@triton.autotune(configs=split_k_configs(), key=["M", "N", "K", "SPLIT_K"])
@triton.jit
def split_k_partials_kernel(a_ptr, b_ptr, work_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            SPLIT_K: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                            BLOCK_SIZE_K: tl.constexpr):
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    rows = (tl.program_id(0) // tiles_n) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = (tl.program_id(0) % tiles_n) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    acc = k_slice_partial(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, rows, cols,
                          SPLIT_K, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K)
    # The workspace is SPLIT_K contiguous M x N fp32 matrices, one per slice of K.
    slice_base = work_ptr + tl.program_id(1).to(tl.int64) * M * N
    tl.store(slice_base + rows[:, None] * N + cols[None, :], acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def reduce_partials_kernel(work_ptr, c_ptr, M, N, stride_cm, stride_cn, SPLIT_K: tl.constexpr,
                           BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < M * N
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):  # slice 0 first, always: the same bits every run
        total += tl.load(work_ptr + s * M * N + offs, mask=inside, other=0.0)
    c_ptrs = c_ptr + (offs // N) * stride_cm + (offs % N) * stride_cn
    tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=inside)


def _check(a, b):
    assert a.dtype == b.dtype == torch.float16 and a.shape[1] == b.shape[0], "fp16 a (M x K) and b (K x N)"
    return a.shape[0], b.shape[1], a.shape[1]


def _tiles(M, N):
    return lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),
                         meta["SPLIT_K"])


def split_k_matmul_atomic(a, b, split_k):
    """a @ b in float32, the K slices added with atomics (one launch, not bitwise repeatable)."""
    M, N, K = _check(a, b)
    c = torch.zeros((M, N), device=a.device, dtype=torch.float32)  # the atomics add into it
    split_k_atomic_kernel[_tiles(M, N)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                        c.stride(0), c.stride(1), SPLIT_K=split_k)
    return c


def split_k_matmul_workspace(a, b, split_k, out_dtype=torch.float16):
    """a @ b in out_dtype, the K slices reduced in a fixed order by a second kernel."""
    M, N, K = _check(a, b)
    work = torch.empty((split_k, M, N), device=a.device, dtype=torch.float32)
    c = torch.empty((M, N), device=a.device, dtype=out_dtype)
    split_k_partials_kernel[_tiles(M, N)](a, b, work, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                          SPLIT_K=split_k)
    block = 1024 if ON_GPU else 256
    reduce_partials_kernel[(triton.cdiv(M * N, block),)](work, c, M, N, c.stride(0), c.stride(1),
                                                        SPLIT_K=split_k, BLOCK=block)
    return c


def main(m=None, n=None, k=None, split_k=None, small=False):
    """Multiply random fp16 matrices both ways; True when both match and the workspace
    variant gives the same bits twice."""
    device = "cuda" if ON_GPU else "cpu"
    big = ON_GPU and not small
    m, n, k = m or (512 if big else 19), n or (512 if big else 45), k or (16384 if big else 700)
    split_k = split_k or (8 if big else 4)
    a = torch.randn((m, k), device=device, dtype=torch.float16)
    b = torch.randn((k, n), device=device, dtype=torch.float16)
    expected = a.double() @ b.double()
    ok = True
    variants = [("atomics", lambda: split_k_matmul_atomic(a, b, split_k), 1e-3),  # fp32 output
                ("workspace", lambda: split_k_matmul_workspace(a, b, split_k), 1e-2)]  # fp16 output
    for name, run, tol in variants:
        c = run()
        err = (c.double() - expected).abs().max().item()
        try:  # values of size ~sqrt(K): scale the absolute tolerance with them
            triton.testing.assert_close(c.double(), expected, atol=tol * k ** 0.5, rtol=tol)
            good = True
        except AssertionError:
            good = False
        extra = ""
        if name == "workspace":
            same = torch.equal(c, run())
            good &= same
            extra = f", identical bits twice: {same}"
        ok &= good
        print(f"split-K matmul {m}x{k} @ {k}x{n} fp16, SPLIT_K={split_k}, {name} ({str(c.dtype).split('.')[-1]} "
              f"output) on {device}: max abs error {err:.3g}{extra} -> {'OK' if good else 'MISMATCH'}")
    for name, run, _ in variants:
        ms = triton.testing.do_bench(run)
        print(f"time ({name}): {ms:.4f} ms per call, {2 * m * n * k / ms / 1e9:.3g} TFLOP/s")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=None)
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--split-k", type=int, default=None, help="number of K slices")
    parser.add_argument("--small", action="store_true", help="a small, fast run (on the CPU)")
    args = parser.parse_args()
    sys.exit(0 if main(args.m, args.n, args.k, args.split_k, small=args.small) else 1)
