"""FP8 scaled matmul: C = (A_fp8 @ B_fp8) * scale, fp8 e4m3 inputs, fp32 accumulation.

FP8 (e4m3: 4 exponent bits, 3 mantissa bits, largest value 448) halves the bytes of
fp16 and doubles the tensor-core rate, but its range is narrow, so each matrix is
stored divided by a scale that maps its largest magnitude near 448, and the product is
multiplied back in the kernel's epilogue. Two granularities:
  - per tensor: one fp32 scale for A, one for B: C = (A_q @ B_q) * sa * sb;
  - per row / per column: one scale per row of A and per column of B (each row's
    outliers no longer cost the other rows their precision):
    C[i, j] = (A_q @ B_q)[i, j] * sa[i] * sb[j].
Scales are applied to the fp32 accumulator once per output tile, after the K loop,
never inside it. B is stored K-major (an N x K row-major tensor viewed as K x N, i.e.
column-major), the operand layout fp8 tensor cores (Hopper's wgmma) read, and the
layout torch._scaled_mm expects. The output is fp16 or bf16, taken from C's dtype.
Tiles are ordered in groups of GROUP_SIZE_M rows as in examples/03_matmul.py.

On the CPU fp8 is emulated: `torch.float8_e4m3fn` tensors load as their exact values
(every e4m3 number is exact in fp32), so the result is checked exactly the same way.

    python examples/10_fp8_scaled_matmul.py [--m M --n N --k K] [--small]
"""
import argparse
import sys

try:
    import torch
except ModuleNotFoundError:  # the examples are standalone scripts: say what is missing
    raise SystemExit("this example compares against PyTorch: pip install -e '.[test]' "
                     "(or pip install torch)") from None
if not hasattr(torch, "float8_e4m3fn"):
    raise SystemExit(f"this example needs torch.float8_e4m3fn (PyTorch >= 2.1), found torch {torch.__version__}")

import tegula as triton
import tegula.language as tl

ON_GPU = torch.cuda.is_available()
FP8_MAX = 448.0  # the largest finite float8 e4m3fn value


def fp8_configs():
    if not ON_GPU:
        return [triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
                              num_warps=4, num_stages=2)]
    shapes = [  # (BM, BN, BK, stages, warps): fp8 tiles take twice the K of fp16 per byte
        (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (128, 128, 128, 4, 8), (128, 128, 128, 4, 4),
        (128, 64, 128, 4, 4), (64, 128, 128, 4, 4), (64, 64, 128, 4, 4),
    ]
    return [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8},
                          num_stages=s, num_warps=w) for bm, bn, bk, s, w in shapes]


@triton.autotune(configs=fp8_configs(), key=["M", "N", "K", "ROW_WISE"])
@triton.jit
def fp8_scaled_matmul_kernel(a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, M, N, K,
                             stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                             ROW_WISE: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                             BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    programs_per_group = GROUP_SIZE_M * tiles_n
    group_first_m = (pid // programs_per_group) * GROUP_SIZE_M
    group_rows = min(tiles_m - group_first_m, GROUP_SIZE_M)
    tile_m = group_first_m + (pid % programs_per_group) % group_rows
    tile_n = (pid % programs_per_group) // group_rows

    rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn  # stride_bk == 1: K-major

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(ks[:, None] < k_left) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # fp8 x fp8 -> fp32 on the tensor cores
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    # Epilogue: undo the quantization scales on the fp32 accumulator, then round once.
    if ROW_WISE:
        a_scale = tl.load(a_scale_ptr + rows, mask=rows < M, other=0.0)
        b_scale = tl.load(b_scale_ptr + cols, mask=cols < N, other=0.0)
        acc = acc * a_scale[:, None] * b_scale[None, :]
    else:
        acc = acc * (tl.load(a_scale_ptr) * tl.load(b_scale_ptr))
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(rows[:, None] < M) & (cols[None, :] < N))


def fp8_scaled_matmul(a_fp8, b_fp8, a_scale, b_scale, out_dtype=torch.bfloat16):
    """(a_fp8 @ b_fp8) * scales in out_dtype. a_fp8: M x K row-major; b_fp8: K x N
    column-major (K-major); scales: fp32, either one element each (per tensor), or
    a_scale with M elements and b_scale with N (per row of A / per column of B)."""
    assert a_fp8.dtype == b_fp8.dtype == torch.float8_e4m3fn, "float8 e4m3fn inputs"
    assert a_fp8.shape[1] == b_fp8.shape[0], "inner dimensions differ"
    assert b_fp8.stride(0) == 1, "B must be K-major (column-major): pass b.t() of an N x K tensor"
    M, K = a_fp8.shape
    N = b_fp8.shape[1]
    row_wise = a_scale.numel() != 1
    assert a_scale.dtype == b_scale.dtype == torch.float32
    assert (a_scale.numel(), b_scale.numel()) == ((M, N) if row_wise else (1, 1)), "scale shapes"
    c = torch.empty((M, N), device=a_fp8.device, dtype=out_dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)
    fp8_scaled_matmul_kernel[grid](a_fp8, b_fp8, c, a_scale, b_scale, M, N, K,
                                   a_fp8.stride(0), a_fp8.stride(1), b_fp8.stride(0), b_fp8.stride(1),
                                   c.stride(0), c.stride(1), ROW_WISE=row_wise)
    return c


def quantize(x, dim):
    """x / scale in float8 e4m3fn and the fp32 scale: one per tensor (dim None) or one per
    slice along dim, chosen so each slice's largest magnitude maps to FP8_MAX."""
    amax = x.abs().amax() if dim is None else x.abs().amax(dim=dim, keepdim=True)
    scale = (amax.float() / FP8_MAX).clamp(min=1e-12)
    return (x.float() / scale).to(torch.float8_e4m3fn), scale.reshape(-1).contiguous()


def reference(a_fp8, b_fp8, a_scale, b_scale):
    """The exact product of the dequantized inputs, in float64."""
    a = a_fp8.double() * a_scale.double().reshape(-1, 1)  # broadcasts one scale or M of them
    b = b_fp8.double() * b_scale.double().reshape(1, -1)
    return a @ b


def main(m=None, n=None, k=None, small=False):
    """Quantize random matrices both ways, multiply them in fp16 and bf16; True when all match."""
    device = "cuda" if ON_GPU else "cpu"
    big = ON_GPU and not small
    m, n, k = m or (4000 if big else 45), n or (4000 if big else 37), k or (4000 if big else 80)
    # Rows and columns of very different sizes: where per-row scales pay off.
    a = torch.randn((m, k), device=device) * torch.logspace(-2, 1, m, device=device)[:, None]
    b_nk = torch.randn((n, k), device=device) * torch.logspace(0.5, -0.5, n, device=device)[:, None]
    ok = True
    for granularity in ("per-tensor", "per-row/column"):
        dim = None if granularity == "per-tensor" else 1  # B is N x K here: its columns are rows
        a_fp8, a_scale = quantize(a, dim)
        b_nk_fp8, b_scale = quantize(b_nk, dim)
        b_fp8 = b_nk_fp8.t()  # K x N, K-major
        expected = reference(a_fp8, b_fp8, a_scale, b_scale)
        for out_dtype in (torch.float16, torch.bfloat16):
            c = fp8_scaled_matmul(a_fp8, b_fp8, a_scale, b_scale, out_dtype)
            err = ((c.double() - expected).abs() / expected.abs().clamp(min=1e-3)).max().item()
            # On Hopper, fp8 tensor-core products are summed with fewer bits than fp32 (Triton's
            # default there, max_num_imprecise_acc = 2**30, never promotes the partial sums), so
            # an element's error scales with the row's partial sums, not with its own value:
            # the bound is relative to the largest |C|. A wrong tile or scale errs by O(|C|).
            try:
                triton.testing.assert_close(c.double(), expected, atol=1e-2 * expected.abs().max().item(),
                                            rtol=1e-2)
                good = True
            except AssertionError:
                good = False
            ok &= good
            print(f"fp8 e4m3 {m}x{k} @ {k}x{n}, {granularity} scales, {str(out_dtype).split('.')[-1]} output "
                  f"on {device}: max rel error {err:.3g} -> {'OK' if good else 'MISMATCH'}")
    if ON_GPU:
        print(f"autotuning: best config {fp8_scaled_matmul_kernel.best_config}")
    a_fp8, a_scale = quantize(a, None)
    b_nk_fp8, b_scale = quantize(b_nk, None)
    ms = triton.testing.do_bench(lambda: fp8_scaled_matmul(a_fp8, b_nk_fp8.t(), a_scale, b_scale))
    print(f"time: {ms:.4f} ms per call, {2 * m * n * k / ms / 1e9:.3g} TFLOP/s")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=None)
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--small", action="store_true", help="a small, fast run (on the CPU)")
    args = parser.parse_args()
    sys.exit(0 if main(args.m, args.n, args.k, small=args.small) else 1)
