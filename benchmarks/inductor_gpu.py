"""torch.compile (Inductor) on tegula vs on Triton 3.6, on the GPU: each mode in its own
fresh process (Inductor's caches in a fresh directory), the same graphs, compared with
eager for correctness; the compiled step time and the first-compile wall time.

    python benchmarks/inductor_gpu.py            # both modes, prints ratios
    python benchmarks/inductor_gpu.py --child    # one mode, whichever `triton` imports
    python benchmarks/inductor_gpu.py --profile  # also each kernel's time per step, side by side

Graphs:
- `pointwise_reduction`: layer norm, GELU, softmax over the last dimension, a residual
  (memory-bound: Inductor's pointwise and reduction kernels), forward and backward;
- `block`: a small transformer block (layer norm, FlexAttention with a causal block
  mask, MLP), forward and backward (the matmuls are cuBLAS in both modes; attention is
  Inductor's FlexAttention template, a Triton kernel).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(profile: bool = False) -> dict:
    import torch
    import torch.nn.functional as F
    import triton
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    dev = "cuda"
    out = {"triton": triton.__version__, "module": getattr(triton, "__file__", "?")}

    def pointwise_reduction(x, w, b):
        y = F.layer_norm(x, (x.shape[-1],), w, b)
        y = F.gelu(y, approximate="tanh")
        return torch.softmax(y, dim=-1) + x

    B, S, H, D = 4, 1024, 8, 64
    E = H * D

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(E), torch.nn.LayerNorm(E)
            self.qkv, self.proj = torch.nn.Linear(E, 3 * E), torch.nn.Linear(E, E)
            self.fc1, self.fc2 = torch.nn.Linear(E, 4 * E), torch.nn.Linear(4 * E, E)

        def forward(self, x, mask):
            q, k, v = self.qkv(self.ln1(x)).view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)
            a = flex_attention(q, k, v, block_mask=mask).transpose(1, 2).reshape(B, S, E)
            x = x + self.proj(a)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def causal(b, h, q, kv):
        return q >= kv

    mask = create_block_mask(causal, B=None, H=None, Q_LEN=S, KV_LEN=S, device=dev)
    cases = {
        "pointwise_reduction": (pointwise_reduction,
                                lambda: [torch.randn(8192, 1024, device=dev, requires_grad=True),
                                         torch.randn(1024, device=dev, requires_grad=True),
                                         torch.randn(1024, device=dev, requires_grad=True)]),
    }
    block = Block().to(dev).to(torch.bfloat16)
    cases["block"] = (lambda x: block(x, mask),
                      lambda: [torch.randn(B, S, E, device=dev, dtype=torch.bfloat16, requires_grad=True)])

    for name, (fn, make) in cases.items():
        args = make()
        ref = fn(*args)
        ref.float().square().mean().backward()
        ref_grad = args[0].grad.detach().clone()
        compiled = torch.compile(fn)
        args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        got = compiled(*args)
        got.float().square().mean().backward()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        err = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
        gerr = ((args[0].grad.float() - ref_grad.float()).norm() / ref_grad.float().norm()).item()

        def step():
            for a in args:
                a.grad = None
            compiled(*args).float().square().mean().backward()

        for _ in range(3):
            step()
        times = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        out[name] = {"first_compile_s": first, "step_ms": times[len(times) // 2], "rel_err": err, "grad_rel_err": gerr}
        if profile:
            out[name]["kernels_us"] = _kernel_times(step)
    return out


def _kernel_times(step, steps: int = 10) -> dict[str, float]:
    """GPU microseconds per step of each kernel the step launches (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            totals[ev.name] = totals.get(ev.name, 0.0) + ev.device_time / steps
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--profile", action="store_true",
                    help="also time each kernel of a step (torch.profiler) and print them side by side")
    ap.add_argument("--out", default=os.environ.get("OUT", tempfile.gettempdir()))
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.profile)), flush=True)
        return 0
    results = {}
    for who in ("triton", "tegula"):
        env = dict(os.environ, PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(),
                   TRITON_CACHE_DIR=tempfile.mkdtemp(), TEGULA_CACHE_DIR=tempfile.mkdtemp())
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child"] + (["--profile"] if a.profile else [])
        if who == "tegula":
            env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
            cmd = [sys.executable, "-m", "tegula.compat"] + cmd[1:]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
        Path(a.out, f"inductor.{who}.log").write_text(p.stdout + p.stderr)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        results[who] = json.loads(line[7:]) if line else {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
        print(who, json.dumps(results[who]), flush=True)
    Path(a.out, "inductor.json").write_text(json.dumps(results, indent=1))
    tr, tg = results["triton"], results["tegula"]
    for name in ("pointwise_reduction", "block"):
        if name in tr and name in tg:
            print(f"{name:22} step tegula {tg[name]['step_ms']:.3f} ms, triton {tr[name]['step_ms']:.3f} ms: "
                  f"tegula/triton speed {tr[name]['step_ms'] / tg[name]['step_ms']:.3f}; first compile "
                  f"{tg[name]['first_compile_s']:.1f} s vs {tr[name]['first_compile_s']:.1f} s; "
                  f"rel err {tg[name]['rel_err']:.1e} / grad {tg[name]['grad_rel_err']:.1e}")
            if a.profile:
                _print_kernels(name, tr[name]["kernels_us"], tg[name]["kernels_us"])
    return 0


def _print_kernels(graph: str, triton_us: dict[str, float], tegula_us: dict[str, float]) -> None:
    """Each kernel's µs per step under both compilers, costliest first (Inductor names a
    graph's kernels the same way whichever compiler builds them)."""
    print(f"  {graph}: kernel µs per step, tegula / Triton")
    for k in sorted(set(triton_us) | set(tegula_us), key=lambda k: -max(triton_us.get(k, 0), tegula_us.get(k, 0))):
        tg, tr = tegula_us.get(k, 0.0), triton_us.get(k, 0.0)
        print(f"    {tg:9.1f} {tr:9.1f}  {tr / tg if tg else float('nan'):5.2f}  {k[:100]}")


if __name__ == "__main__":
    raise SystemExit(main())
