"""The pointer matmul (`benchmarks/kernels.py`) at a fixed M = N with K varied, tegula
against Triton in one process (GPU only): how the time difference grows with K tells a
per-tile cost (prologue, epilogue) from a per-iteration one.

    python benchmarks/matmul_k_scan_gpu.py 128,128,64,4,4 3072 256,1024,3072,12288
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.desc_matmul_gpu import checked_runner  # noqa: E402
from benchmarks.load import load_tegula_kernels, load_triton_kernels  # noqa: E402
from benchmarks.run_gpu import bench_rounds  # noqa: E402

mods = {"tegula": load_tegula_kernels(), "triton": load_triton_kernels()}
cfg = tuple(int(x) for x in sys.argv[1].split(","))
bm, bn = cfg[:2]
mn = int(sys.argv[2])
for kk in [int(x) for x in sys.argv[3].split(",")]:
    a = torch.randn(mn, kk, device="cuda", dtype=torch.float16)
    b = torch.randn(kk, mn, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    fns = {who: checked_runner(mod, a, b, cfg, ref, 1.0, who) for who, mod in mods.items()}
    t = {k: ms * 1000 for k, ms in bench_rounds(fns)[0].items()}
    tiles = ((mn + bm - 1) // bm) * ((mn + bn - 1) // bn)
    waves = -(-tiles // 132)
    flop = 2 * mn * mn * kk
    print(f"M=N={mn} K={kk}: tegula {t['tegula']:.1f} us triton {t['triton']:.1f} us"
          f"  ratio {t['triton'] / t['tegula']:.3f}  diff/wave {(t['tegula'] - t['triton']) / waves:.2f} us"
          f"  TFLOP/s {flop / t['tegula'] / 1e6:.0f} / {flop / t['triton'] / 1e6:.0f}", flush=True)
