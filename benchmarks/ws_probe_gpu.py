"""Probe warp-specialized kernels on the GPU one case at a time, each in its own process
with a timeout, so a hang is reported instead of taking the device call with it.

    python benchmarks/ws_probe_gpu.py [--timeout 25] [--sanitize] CASE [CASE ...]

A CASE is `kind,M,N,K,BM,BN,BK,stages,warps[,regs]`: kind `ws` runs
`benchmarks/kernels.py`'s `matmul_desc_kernel` with `WARP_SPECIALIZE=True` (and
`TEGULA_WARP_SPECIALIZE=1`), `desc` without; `regs` 0 turns the partitions' register
re-sizing off (`TEGULA_WARP_SPECIALIZE_REGISTERS=0`). Each case gets a fresh compile
cache. `--sanitize` runs each case under `compute-sanitizer --tool synccheck` (barrier
and mbarrier misuse is reported where it happens, before a hang). Prints per case:
passed / wrong (fraction of bad elements) / TIMEOUT / the error, and the warps,
registers and spills of the compiled kernel.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = r'''
import sys, torch
sys.path.insert(0, sys.argv[1])
from benchmarks.load import load_tegula_kernels
mod = load_tegula_kernels()
kind, (M, N, K, bm, bn, bk, s, w) = sys.argv[2], map(int, sys.argv[3:11])
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
grid = ((M + bm - 1) // bm * ((N + bn - 1) // bn),)
k = mod.matmul_desc_kernel[grid](a, b, c, M, N, K, K, N, N, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                 WARP_SPECIALIZE=kind == "ws", num_warps=w, num_stages=s)
md = k.metadata
print(f"compiled: warps {md.num_warps} regs {md.n_regs} spills {md.n_spills}", flush=True)
torch.cuda.synchronize()
ref = a.float() @ b.float()
bad = ((c.float() - ref).abs() > 0.125 + 0.02 * ref.abs()).float().mean().item()
print("passed" if bad == 0 else f"wrong: {bad:.4f} of C", flush=True)
'''


def run_case(script: str, case: str, timeout: float, sanitize: bool) -> str:
    parts = case.split(",")
    kind, dims, regs = parts[0], parts[1:9], parts[9] if len(parts) > 9 else "1"
    env = dict(os.environ, TEGULA_CACHE_DIR=tempfile.mkdtemp(), TEGULA_WARP_SPECIALIZE="1",
               TEGULA_WARP_SPECIALIZE_REGISTERS=regs, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, script, str(ROOT), kind, *dims]
    if sanitize and shutil.which("compute-sanitizer"):
        cmd = ["compute-sanitizer", "--tool", "synccheck", *cmd]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "Warning" not in ln and ln.strip()]
        return " | ".join(lines[-4:]) if lines else f"exit {r.returncode}, no output"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        seen = [ln for ln in out.splitlines() if ln.startswith("compiled")]
        return f"TIMEOUT after {timeout:g} s ({seen[-1] if seen else 'not compiled yet'})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--timeout", type=float, default=25.0)
    ap.add_argument("--sanitize", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = str(Path(tmp) / "ws_case.py")
        Path(script).write_text(CASE)
        for case in args.cases:
            print(f"{case:40s} {run_case(script, case, args.timeout, args.sanitize)}", flush=True)


if __name__ == "__main__":
    main()
