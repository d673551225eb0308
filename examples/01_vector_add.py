"""Vector addition: the smallest complete kernel, and tegula's demo.

Each program instance adds one BLOCK_SIZE-long slice of two vectors; a mask keeps the
last, partial slice inside the arrays. The script runs on the GPU when torch sees one,
else on the CPU (CPU torch tensors, or numpy arrays when torch is not installed),
checks the result against the host's own addition, and prints a timing line.

    python examples/01_vector_add.py                 # check + time
    python examples/01_vector_add.py --small         # a quick run
    python examples/01_vector_add.py --benchmark --save-path docs/   # perf_report plot

The kernel is plain Triton: replacing the two tegula imports with `import triton` and
`import triton.language as tl` gives the same program.
"""
import argparse
import sys

import numpy as np

import tegula as triton
import tegula.language as tl

try:
    import torch
except ImportError:  # the kernels need only numpy arrays
    torch = None


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds)
    y = tl.load(y_ptr + offsets, mask=in_bounds)
    tl.store(out_ptr + offsets, x + y, mask=in_bounds)


def add(x, y, block_size=1024):
    """x + y computed by add_kernel; x and y are numpy arrays or torch tensors."""
    out = np.empty_like(x) if isinstance(x, np.ndarray) else torch.empty_like(x)
    n = out.size if isinstance(out, np.ndarray) else out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)
    return out


def device_name():
    return "cuda" if torch is not None and torch.cuda.is_available() else "cpu"


def random_vectors(n, device):
    if torch is None:
        rng = np.random.default_rng()
        return rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    return torch.randn(n, device=device), torch.randn(n, device=device)


def to_host64(v):
    return v.astype(np.float64) if isinstance(v, np.ndarray) else v.double().cpu().numpy()


def main(size=None, small=False):
    """Add two random vectors of `size` elements; True when the result is right."""
    device = device_name()
    if size is None:
        size = 98_437 if device == "cuda" and not small else 10_007  # not a multiple of the block
    x, y = random_vectors(size, device)
    out = add(x, y)
    expected = to_host64(x) + to_host64(y)
    err = float(np.max(np.abs(to_host64(out) - expected)))
    ok = err <= 1e-6 * max(1.0, float(np.max(np.abs(expected))))
    kind = "numpy" if torch is None else f"torch {device}"
    print(f"vector add of {size} float32 elements on {kind}: max abs error {err:.3g} -> "
          f"{'OK' if ok else 'MISMATCH'}")
    ms = triton.testing.do_bench(lambda: add(x, y))
    print(f"time: {ms:.4f} ms per call, {3 * 4 * size / ms / 1e6:.3g} GB/s")
    return ok


def benchmark(save_path="", show_plots=False):
    """perf_report over sizes: tegula's add against the library's own addition."""
    device = device_name()
    reference = "torch" if torch is not None else "numpy"
    sizes = [2**i for i in (range(12, 28, 2) if device == "cuda" else range(10, 18, 2))]

    @triton.testing.perf_report(triton.testing.Benchmark(
        x_names=["size"], x_vals=sizes, x_log=True, line_arg="provider",
        line_vals=["tegula", reference], line_names=["tegula", reference],
        styles=[("blue", "-"), ("green", "-")], ylabel="GB/s",
        plot_name=f"vector-add-performance-{device}", args={}))
    def bench(size, provider):
        x, y = random_vectors(size, device)
        fn = (lambda: add(x, y)) if provider == "tegula" else (lambda: x + y)
        ms, lo, hi = triton.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8])
        gbps = lambda t: 3 * 4 * size / t / 1e6
        return gbps(ms), gbps(hi), gbps(lo)

    bench.run(print_data=True, show_plots=show_plots, save_path=save_path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--small", action="store_true", help="a small, fast run (CPU interpreter)")
    parser.add_argument("--benchmark", action="store_true", help="run the perf_report sweep")
    parser.add_argument("--save-path", default="", help="where --benchmark writes its PNG and CSV")
    args = parser.parse_args()
    if args.benchmark:
        benchmark(save_path=args.save_path)
        sys.exit(0)
    sys.exit(0 if main(args.size, small=args.small) else 1)
