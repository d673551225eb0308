"""cp.async through L1 or around it (`backends/cuda/copy_caching.py`): the pointer
matmul of `benchmarks/kernels.py` compiled under TEGULA_CP_ASYNC_L1 = 0 / auto / 1 (a
fresh copy of the kernels for each value, so each compiles under its own), cuBLAS
beside, five rounds interleaved in one process; TFLOP/s medians and ratios (GPU only).

    python benchmarks/copy_caching_gpu.py "128,128,64,4,4;128,256,64,3,8" 3000,3008,4096

(configs BM,BN,BK,stages,warps separated by ';', then square sizes)
"""
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from benchmarks.load import KERNELS, import_file, triton_is_tegula  # noqa: E402

mods = {}
for v in ("0", "auto", "1"):
    with triton_is_tegula():
        mods[v] = import_file(f"kernels_l1_{v}", KERNELS)
cfgs = [tuple(int(x) for x in c.split(",")) for c in sys.argv[1].split(";")]
sizes = [int(s) for s in sys.argv[2].split(",")]
for cfg in cfgs:
    bm, bn, bk, s, w = cfg
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        fns = {}
        for v, mod in mods.items():
            c = torch.empty(n, n, device="cuda", dtype=torch.float16)
            grid = ((n + bm - 1) // bm * ((n + bn - 1) // bn),)
            f = (lambda mod=mod, c=c, grid=grid: mod.matmul_kernel[grid](
                a, b, c, n, n, n, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1,
                BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=w, num_stages=s))
            os.environ["TEGULA_CP_ASYNC_L1"] = v
            f()
            os.environ.pop("TEGULA_CP_ASYNC_L1")
            torch.cuda.synchronize()
            assert (c.float() - ref).abs().max().item() < 0.5, v
            fns[v] = f
        fns["cublas"] = lambda: torch.matmul(a, b)
        times = {k: [] for k in fns}
        for _ in range(5):
            for k, f in fns.items():
                times[k].append(do_bench(f, rep=60, return_mode="median"))
        tf = {k: 2 * n**3 / statistics.median(t) / 1e9 for k, t in times.items()}
        print(f"{n}^3 {bm}x{bn}x{bk}s{s}w{w}: " + "  ".join(f"{k} {v:.1f}" for k, v in tf.items())
              + f"  | auto/0 {tf['auto'] / tf['0']:.3f} 1/0 {tf['1'] / tf['0']:.3f}"
              + f" auto/cublas {tf['auto'] / tf['cublas']:.3f}", flush=True)
