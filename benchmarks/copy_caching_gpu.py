"""cp.async through L1 or around it (`backends/cuda/copy_caching.py`): the pointer
matmul of `benchmarks/kernels.py` compiled under TEGULA_CP_ASYNC_L1 = 0 / auto / 1 (a
fresh copy of the kernels for each value, so each compiles under its own), cuBLAS
beside, five rounds interleaved in one process (`run_gpu.bench_rounds`); TFLOP/s medians and ratios (GPU only).

    python benchmarks/copy_caching_gpu.py "128,128,64,4,4;128,256,64,3,8" 3000,3008,4096

(configs BM,BN,BK,stages,warps separated by ';', then square sizes)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.desc_matmul_gpu import checked_runner  # noqa: E402
from benchmarks.load import KERNELS, import_file, triton_is_tegula  # noqa: E402
from benchmarks.run_gpu import bench_rounds  # noqa: E402

mods = {}
for v in ("0", "auto", "1"):
    with triton_is_tegula():
        mods[v] = import_file(f"kernels_l1_{v}", KERNELS)
cfgs = [tuple(int(x) for x in c.split(",")) for c in sys.argv[1].split(";")]
sizes = [int(s) for s in sys.argv[2].split(",")]
for cfg in cfgs:
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        fns = {v: checked_runner(mod, a, b, cfg, ref, 0.5, v, env={"TEGULA_CP_ASYNC_L1": v})
               for v, mod in mods.items()}
        fns["cublas"] = lambda: torch.matmul(a, b)
        tf = {k: 2 * n**3 / ms / 1e9 for k, ms in bench_rounds(fns)[0].items()}
        name = f"{'x'.join(map(str, cfg[:3]))}s{cfg[3]}w{cfg[4]}"
        print(f"{n}^3 {name}: " + "  ".join(f"{k} {v:.1f}" for k, v in tf.items())
              + f"  | auto/0 {tf['auto'] / tf['0']:.3f} 1/0 {tf['1'] / tf['0']:.3f}"
              + f" auto/cublas {tf['auto'] / tf['cublas']:.3f}", flush=True)
