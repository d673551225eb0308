"""Compile tutorial 08's in-kernel-descriptor grouped GEMM (`grouped_matmul_desc_kernel`)
for sm_90a (or sm_80) with each of the tutorial's 16 autotune configs, ahead of time (no
GPU needed), and print per config the compile time and the global-memory instruction
mix of its PTX: scalar/vector `ld.global`, `cp.async` (and how many take a src-size),
`cp.async.bulk.tensor` (TMA), `wgmma`, `mma`.

    python benchmarks/grouped_desc_compile.py            # sm_90a, 16 configs
    python benchmarks/grouped_desc_compile.py --arch 80 --first 4
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIGNATURE = {"group_a_ptrs": "*u64", "group_b_ptrs": "*u64", "group_c_ptrs": "*u64", "group_gemm_sizes": "*i32",
             "g_lds": "*i32", "group_size": "i32", "NUM_SM": "constexpr", "BLOCK_SIZE_M": "constexpr",
             "BLOCK_SIZE_N": "constexpr", "BLOCK_SIZE_K": "constexpr", "FP8": "constexpr"}
# tutorial 08's tma_configs, in its order
CONFIGS = [(128, bn, bk, s, w) for bn in (128, 256) for bk in (64, 128) for s in (3, 4) for w in (4, 8)]


def instruction_mix(ptx: str) -> dict[str, int]:
    def n(pattern: str) -> int:
        return len(re.findall(pattern, ptx, re.M))
    return {"ld.global": n(r"^\s*(?:@!?%p\d+\s+)?ld\.global"),
            "ld.global.v": n(r"^\s*(?:@!?%p\d+\s+)?ld\.global[.\w]*\.v\d"),
            "cp.async": n(r"^\s*(?:@!?%p\d+\s+)?cp\.async\.c[ag]"),
            "cp.async+srcsize": n(r"^\s*(?:@!?%p\d+\s+)?cp\.async\.c[ag][^;]*,[^;]*,[^;]*,[^;]*;"),
            "cp.async.bulk.tensor": n(r"cp\.async\.bulk\.tensor"),
            "wgmma": n(r"wgmma\.mma_async"), "mma": n(r"\bmma\.sync")}


def compile_config(fn, arch: int, cfg: tuple[int, ...]):
    import tegula
    from tegula.backends.compiler import GPUTarget
    from tegula.compiler import ASTSource

    bm, bn, bk, s, w = cfg
    cx = {"NUM_SM": 132, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "FP8": False}
    attrs = {k: 16 for k in ("group_a_ptrs", "group_b_ptrs", "group_c_ptrs", "group_gemm_sizes", "g_lds")}
    return tegula.compile(ASTSource(fn, SIGNATURE, cx, attrs=attrs), target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": w, "num_stages": s})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--first", type=int, default=len(CONFIGS), help="only the first N configs")
    args = ap.parse_args()
    from benchmarks.load import load_tegula_kernels
    from tegula.config import knobs

    fn = load_tegula_kernels().grouped_matmul_desc_kernel
    knobs.always_compile = True   # time the compile, not the on-disk cache
    for cfg in CONFIGS[:args.first]:
        t0 = time.perf_counter()
        ck = compile_config(fn, args.arch, cfg)
        dt = time.perf_counter() - t0
        md = ck.metadata
        get = md.get if isinstance(md, dict) else (lambda k: getattr(md, k, None))
        regs, spills = get("n_regs"), get("n_spills")
        print(f"BM{cfg[0]} BN{cfg[1]} BK{cfg[2]} s{cfg[3]} w{cfg[4]}  {dt:6.2f} s  regs {regs} spills {spills}  "
              f"{instruction_mix(ck.asm['ptx'])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
