"""Fused row-wise softmax: one read and one write of the matrix.

A row fits in one tile (BLOCK_SIZE is the next power of two above the row length; the
mask pads the rest with -inf, which exp turns into 0). A fixed number of persistent
programs walks the rows with a stride, so the grid size follows the machine (multi-
processors reported by the driver), not the matrix.

    python examples/02_fused_softmax.py [--rows R --cols C] [--small]
"""
import argparse
import functools
import sys

try:
    import torch
except ModuleNotFoundError:  # the examples are standalone scripts: say what is missing
    raise SystemExit("this example compares against PyTorch: pip install -e '.[test]' "
                     "(or pip install torch)") from None

import tegula as triton
import tegula.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    first_row = tl.program_id(0)
    row_step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < n_cols
    for row in tl.range(first_row, n_rows, row_step):
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=in_row, other=-float("inf"))
        shifted = x - tl.max(x, axis=0)  # the largest exponent becomes 0: no overflow
        numerator = tl.exp(shifted)
        denominator = tl.sum(numerator, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, numerator / denominator, mask=in_row)


@functools.lru_cache(maxsize=None)
def multiprocessor_count():
    # Cached: the query is slow in some drivers (Triton's takes ~0.7 ms), and a per-call
    # host cost would show up in the kernel's timing.
    device = triton.runtime.driver.active.get_current_device()
    return triton.runtime.driver.active.utils.get_device_properties(device)["multiprocessor_count"]


def softmax(x):
    """Softmax over the last axis of a 2-D float32 tensor."""
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    # More warps for wider rows, so each thread keeps a modest number of elements.
    num_warps = 4 if block < 2048 else (8 if block < 8192 else 16)
    programs = min(n_rows, 8 * multiprocessor_count())
    softmax_kernel[(programs,)](out, x, x.stride(0), out.stride(0), n_rows, n_cols,
                                BLOCK_SIZE=block, num_warps=num_warps)
    return out


def main(rows=None, cols=None, small=False):
    """Softmax of a random rows x cols matrix against torch in float64; True when right."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    big = device == "cuda" and not small
    rows = rows or (4096 if big else 37)
    cols = cols or (1823 if big else 781)  # not powers of two: the mask matters
    x = torch.randn(rows, cols, device=device)
    y = softmax(x)
    expected = torch.softmax(x.double(), dim=1)
    err = (y.double() - expected).abs().max().item()
    try:
        triton.testing.assert_close(y.double(), expected, atol=1e-6, rtol=1e-5)
        ok = True
    except AssertionError:
        ok = False
    print(f"softmax of a {rows}x{cols} float32 matrix on {device}: max abs error {err:.3g} -> "
          f"{'OK' if ok else 'MISMATCH'}")
    ms = triton.testing.do_bench(lambda: softmax(x))
    print(f"time: {ms:.4f} ms per call, {2 * x.numel() * 4 / ms / 1e6:.3g} GB/s")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--cols", type=int, default=None)
    parser.add_argument("--small", action="store_true", help="a small, fast run (CPU interpreter)")
    args = parser.parse_args()
    sys.exit(0 if main(args.rows, args.cols, small=args.small) else 1)
