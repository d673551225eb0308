"""Layer normalization, forward and backward, without atomics.

Forward: one program per row computes the row's mean and 1/std in float32, writes
y = (x - mean) / std * w + b, and keeps mean and 1/std for the backward pass.

Backward: dx needs only its own row, but dw and db are sums over all rows. Instead of
atomically adding every row into one buffer (fast but nondeterministic, and contended),
each program of the first kernel handles a contiguous group of rows and writes its own
partial dw/db row; a second kernel sums the partial rows column block by column block.
The result is deterministic: the same inputs give bit-identical gradients.

    python examples/05_layer_norm.py [--rows M --cols N] [--small]
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
def layer_norm_fwd(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, row_stride, N, eps,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < N
    x = tl.load(x_ptr + row * row_stride + cols, mask=in_row, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centered = tl.where(in_row, x - mean, 0.0)  # padding lanes must not count in the variance
    rstd = 1.0 / tl.sqrt(tl.sum(centered * centered, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    y = centered * rstd * w + b
    tl.store(y_ptr + row * row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def layer_norm_bwd_dx(dx_ptr, dy_ptr, partial_dw_ptr, partial_db_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr,
                      row_stride, M, N, rows_per_program, BLOCK_SIZE: tl.constexpr):
    group = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < N
    w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    first = group * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    for row in range(first, last):
        x = tl.load(x_ptr + row * row_stride + cols, mask=in_row, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * row_stride + cols, mask=in_row, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(in_row, (x - mean) * rstd, 0.0)
        wdy = w * dy
        # dx = rstd * (wdy - mean(wdy) - xhat * mean(xhat * wdy)), means over the N columns
        c1 = tl.sum(xhat * wdy, axis=0) / N
        c2 = tl.sum(wdy, axis=0) / N
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row * row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=in_row)
        dw += dy * xhat
        db += dy
    tl.store(partial_dw_ptr + group * N + cols, dw, mask=in_row)
    tl.store(partial_db_ptr + group * N + cols, db, mask=in_row)


@triton.jit
def layer_norm_bwd_dwdb(partial_dw_ptr, partial_db_ptr, dw_ptr, db_ptr, n_partials, N,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, n_partials, BLOCK_M):
        parts = start + tl.arange(0, BLOCK_M)
        mask = (parts[:, None] < n_partials) & (cols[None, :] < N)
        offsets = parts[:, None] * N + cols[None, :]
        dw += tl.load(partial_dw_ptr + offsets, mask=mask, other=0.0)
        db += tl.load(partial_db_ptr + offsets, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=cols < N)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=cols < N)


def block_and_warps(N, itemsize):
    block = triton.next_power_of_2(N)
    if block * itemsize > 65536:
        raise ValueError(f"rows of {N} elements do not fit one tile; this example keeps a row in one tile")
    return block, min(max(block // 256, 1), 8)


@functools.lru_cache(maxsize=None)
def multiprocessor_count():
    # Cached: the query is slow in some drivers (Triton's takes ~0.7 ms per call).
    device = triton.runtime.driver.active.get_current_device()
    return triton.runtime.driver.active.utils.get_device_properties(device)["multiprocessor_count"]


def layer_norm_forward(x, w, b, eps=1e-5):
    """y, mean, rstd for a 2-D x normalized over its last axis."""
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    block, warps = block_and_warps(N, x.element_size())
    layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, eps, BLOCK_SIZE=block, num_warps=warps)
    return y, mean, rstd


def layer_norm_backward(dy, x, w, mean, rstd):
    """dx, dw, db given the upstream gradient dy and the forward pass's mean and rstd."""
    M, N = x.shape
    block, warps = block_and_warps(N, x.element_size())
    # Enough groups to fill the machine; each writes one row of partial sums.
    groups = max(1, min(M, 4 * multiprocessor_count()))
    rows_per_program = triton.cdiv(M, groups)
    groups = triton.cdiv(M, rows_per_program)
    dx = torch.empty_like(x)
    partial_dw = torch.empty((groups, N), device=x.device, dtype=torch.float32)
    partial_db = torch.empty((groups, N), device=x.device, dtype=torch.float32)
    layer_norm_bwd_dx[(groups,)](dx, dy, partial_dw, partial_db, x, w, mean, rstd, x.stride(0), M, N,
                                 rows_per_program, BLOCK_SIZE=block, num_warps=warps)
    dw = torch.empty_like(w)
    db = torch.empty_like(w)
    block_n = 32
    layer_norm_bwd_dwdb[(triton.cdiv(N, block_n),)](partial_dw, partial_db, dw, db, groups, N,
                                                   BLOCK_M=32, BLOCK_N=block_n)
    return dx, dw, db


def close(name, got, expected, atol, rtol):
    err = (got.double() - expected).abs().max().item()
    try:
        triton.testing.assert_close(got.double(), expected, atol=atol, rtol=rtol)
        good = True
    except AssertionError:
        good = False
    print(f"  {name}: max abs error {err:.3g} -> {'OK' if good else 'MISMATCH'}")
    return good


def main(rows=None, cols=None, small=False, dtype=torch.float16):
    """Forward and backward of a random layer norm against torch autograd in float64."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    big = device == "cuda" and not small
    M, N = rows or (4000 if big else 37), cols or (3008 if big else 129)  # N not a power of two
    x = torch.randn(M, N, device=device, dtype=dtype)
    w = torch.rand(N, device=device, dtype=dtype) + 0.5
    b = torch.randn(N, device=device, dtype=dtype)
    dy = 0.1 * torch.randn(M, N, device=device, dtype=dtype)
    eps = 1e-5

    y, mean, rstd = layer_norm_forward(x, w, b, eps)
    dx, dw, db = layer_norm_backward(dy, x, w, mean, rstd)

    x64, w64, b64 = (t.double().requires_grad_(True) for t in (x, w, b))
    y64 = torch.nn.functional.layer_norm(x64, (N,), w64, b64, eps)
    y64.backward(dy.double())

    print(f"layer norm of a {M}x{N} {str(dtype).split('.')[-1]} matrix on {device}:")
    tol = dict(atol=1e-2, rtol=1e-2)
    ok = close("y ", y, y64.detach(), **tol)
    ok &= close("dx", dx, x64.grad, **tol)
    ok &= close("dw", dw, w64.grad, **tol)
    ok &= close("db", db, b64.grad, **tol)
    again = layer_norm_backward(dy, x, w, mean, rstd)
    deterministic = all(torch.equal(p, q) for p, q in zip(again, (dx, dw, db)))
    print(f"  backward twice gives identical bits: {deterministic}")
    ok &= deterministic
    print(f"-> {'OK' if ok else 'MISMATCH'}")
    fwd_ms = triton.testing.do_bench(lambda: layer_norm_forward(x, w, b, eps))
    bwd_ms = triton.testing.do_bench(lambda: layer_norm_backward(dy, x, w, mean, rstd))
    nbytes = x.numel() * x.element_size()
    print(f"time: forward {fwd_ms:.4f} ms ({2 * nbytes / fwd_ms / 1e6:.3g} GB/s), "
          f"backward {bwd_ms:.4f} ms ({3 * nbytes / bwd_ms / 1e6:.3g} GB/s)")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--cols", type=int, default=None)
    parser.add_argument("--small", action="store_true", help="a small, fast run (CPU interpreter)")
    args = parser.parse_args()
    sys.exit(0 if main(args.rows, args.cols, small=args.small) else 1)
