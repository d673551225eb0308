"""Autotuning the matmul example: tegula vs Triton 3.6, same config list, same run.

Usage (GPU machine):  python benchmarks/autotune_matmul.py [SIZE]

Loads examples/03_matmul.py twice — as tegula code and, with its imports pointing at
the real Triton, as Triton code (cuBLAS through torch.matmul beside them) — and times
each one's first call at SIZE^3 (fresh caches: compiling and benchmarking every
config), then its tuned speed.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TEGULA_CACHE_DIR", tempfile.mkdtemp(prefix="tegula-cache-"))

import torch  # noqa: E402

from benchmarks.load import import_file, triton_is_tegula  # noqa: E402

EXAMPLE = ROOT / "examples" / "03_matmul.py"


def load_as_triton():
    """The example with its two tegula imports replaced by Triton's."""
    src = EXAMPLE.read_text().replace("import tegula as triton", "import triton").replace(
        "import tegula.language as tl", "import triton.language as tl")
    path = Path(tempfile.mkdtemp()) / "matmul_as_triton.py"
    path.write_text(src)
    return import_file("matmul_as_triton", path)


def measure(module, size: int) -> dict:
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    c = module.matmul(a, b, "")
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=0.25, rtol=1e-2)
    from triton.testing import do_bench

    ms = do_bench(lambda: module.matmul(a, b, ""), return_mode="median")
    kernel = module.matmul_kernel
    return {"first_call_s": first, "configs": len(kernel.configs),
            "best": str(kernel.best_config), "TFLOP/s": 2 * size**3 / ms / 1e9}


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    with triton_is_tegula():
        tg = import_file("matmul_as_tegula", EXAMPLE)
    results = {"tegula": measure(tg, size), "triton": measure(load_as_triton(), size)}
    cublas = cublas_tflops(size)
    for who, r in results.items():
        print(f"{who:7} {size}^3: tuning+compile {r['first_call_s']:.2f} s over {r['configs']} configs, "
              f"{r['TFLOP/s']:.1f} TFLOP/s ({r['TFLOP/s'] / cublas:.3f}x cuBLAS), best {r['best']}")
    print(f"cublas  {size}^3: {cublas:.1f} TFLOP/s (torch.matmul, same process); "
          f"tegula/triton {results['tegula']['TFLOP/s'] / results['triton']['TFLOP/s']:.3f}")


def cublas_tflops(size: int) -> float:
    from triton.testing import do_bench

    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    ms = do_bench(lambda: torch.matmul(a, b, out=c), return_mode="median")
    return 2 * size**3 / ms / 1e9


if __name__ == "__main__":
    main()
