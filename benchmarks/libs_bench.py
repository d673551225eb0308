"""Real Triton libraries' ops timed under Triton 3.6 and under tegula, in one process.

    python benchmarks/libs_bench.py [--only rms_norm,gdn_fwd] [--rounds 5] [--out DIR]

liger-kernel and flash-linear-attention (from `.libs/`, built by `prepare_libs.sh`, or
installed) are imported twice: first bound to the real `triton`, then — after
`tegula.compat.install()` and dropping the libraries' modules from `sys.modules` — bound
to tegula. Each op then has a Triton copy and a tegula copy of the same library source,
called on the same inputs: their outputs (and gradients, for ops timed forward and
backward) are compared, and their GPU times taken in interleaved rounds (CUDA events
around a block of back-to-back calls, launch overhead included, as a training loop sees
it). Both compile caches start empty, so the first call's time is the cold compile and
autotuning of every kernel the op launches (Triton compiles an autotuner's configs one
after the other, tegula several at once).

The table printed last: per op, tegula's and Triton's time per call (ms), Triton/tegula
(> 1: tegula faster), the outputs' largest relative difference, and each compiler's
first-call seconds. fla's gated backward is left out: fla refuses it on Hopper under
Triton 3.4-3.7.1 (its #640), whichever compiler runs it.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
LIBS = ROOT / ".libs"
for p in (LIBS / "liger" / "src", LIBS / "fla", LIBS / "site"):
    if p.is_dir() and str(p) not in sys.path:
        sys.path.insert(0, str(p))
sys.path.insert(0, str(ROOT))

# the libraries' modules each op needs, imported once per compiler
MODULES = {
    "rms_norm": "liger_kernel.ops.rms_norm", "layer_norm": "liger_kernel.ops.layer_norm",
    "swiglu": "liger_kernel.ops.swiglu", "geglu": "liger_kernel.ops.geglu", "rope": "liger_kernel.ops.rope",
    "cross_entropy": "liger_kernel.ops.cross_entropy", "flce": "liger_kernel.ops.fused_linear_cross_entropy",
    "fused_moe": "liger_kernel.ops.fused_moe",
    "gdn": "fla.ops.gated_delta_rule", "gla": "fla.ops.gla", "simple_gla": "fla.ops.simple_gla",
    "delta": "fla.ops.delta_rule", "kda": "fla.ops.kda",
}


def _import_all() -> dict[str, Any]:
    out = {}
    for key, name in MODULES.items():
        try:
            out[key] = importlib.import_module(name)
        except Exception as e:  # a library missing here: its ops are reported as such
            out[key] = e
    return out


def _drop_library_modules() -> None:
    for name in [n for n in sys.modules if n.split(".")[0] in ("liger_kernel", "fla")]:
        del sys.modules[name]


class Binding:
    """Which compiler `import triton` finds now. Triton imports some of its modules
    lazily, at the first compile (`triton.compiler`'s backends, its error types): the
    Triton-bound copy of a library must run while `sys.modules` holds the real Triton's
    modules, the tegula-bound copy while it holds tegula's. `use(who)` swaps the
    `triton.*` entries (each side's, lazily imported ones included, kept between uses)."""

    def __init__(self) -> None:
        self.saved: dict[str, dict[str, Any]] = {"triton": {}, "tegula": {}}
        self.current = "triton"

    @staticmethod
    def _triton_modules() -> dict[str, Any]:
        return {n: m for n, m in sys.modules.items() if n == "triton" or n.startswith("triton.")}

    def use(self, who: str) -> None:
        import tegula.compat

        if who == self.current:
            return
        self.saved[self.current] = self._triton_modules()
        if who == "tegula":
            tegula.compat.install()
        else:
            tegula.compat.uninstall()
        sys.modules.update(self.saved[who])
        self.current = who


def ops(torch: Any) -> dict[str, Callable[[dict], tuple[Callable[[], Any], list]]]:
    """name -> build(modules) returning (call, tensors whose gradients the call fills:
    empty for a forward-only op). Inputs are made once per op, shared by both copies."""
    import torch.nn.functional as F
    dev, bf16 = "cuda", torch.bfloat16
    g = torch.Generator(device=dev)

    def rand(*shape, dtype=bf16, grad=False, scale=1.0):
        t = (torch.randn(*shape, device=dev, dtype=torch.float32, generator=g) * scale).to(dtype)
        return t.requires_grad_(grad)

    inputs: dict[str, Any] = {}

    def once(name, make):
        """The op's inputs: made once, then a fresh copy for each compiler (some ops,
        liger's cross entropy among them, write into their inputs)."""
        if name not in inputs:
            g.manual_seed(sum(map(ord, name)))
            inputs[name] = make()
        return tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs[name])

    def fwd_bwd(out_fn, leaves):
        def call():
            for t in leaves:
                t.grad = None
            out = out_fn()
            out = out[0] if isinstance(out, tuple) else out
            out.backward(torch.ones_like(out) if out.dim() else None)
            return out
        return call, leaves

    def rms_norm(m):
        x, w = once("rms", lambda: (rand(8192, 4096, grad=True), rand(4096, grad=True)))
        return fwd_bwd(lambda: m["rms_norm"].LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False), [x, w])

    def layer_norm(m):
        x, w, b = once("ln", lambda: (rand(8192, 4096, grad=True), rand(4096, grad=True), rand(4096, grad=True)))
        return fwd_bwd(lambda: m["layer_norm"].LigerLayerNormFunction.apply(x, w, b, 1e-6), [x, w, b])

    def swiglu(m):
        a, b = once("swiglu", lambda: (rand(8192, 11008, grad=True), rand(8192, 11008, grad=True)))
        return fwd_bwd(lambda: m["swiglu"].LigerSiLUMulFunction.apply(a, b), [a, b])

    def geglu(m):
        a, b = once("geglu", lambda: (rand(8192, 11008, grad=True), rand(8192, 11008, grad=True)))
        return fwd_bwd(lambda: m["geglu"].LigerGELUMulFunction.apply(a, b), [a, b])

    def rope(m):
        def make():
            q, k = rand(4, 32, 2048, 128, grad=True), rand(4, 8, 2048, 128, grad=True)
            ang = torch.rand(1, 2048, 64, device=dev, generator=g) * 6.28
            cos, sin = torch.cat([ang.cos()] * 2, -1).to(bf16), torch.cat([ang.sin()] * 2, -1).to(bf16)
            return q, k, cos, sin

        q, k, cos, sin = once("rope", make)

        def out():
            q2, k2 = m["rope"].LigerRopeFunction.apply(q, k, cos, sin)
            return (q2.float().sum() + k2.float().sum())
        return fwd_bwd(out, [q, k])

    def cross_entropy(m):
        def make():
            return (rand(8192, 32000, grad=True),
                    torch.randint(0, 32000, (8192,), device=dev, generator=g))
        x, t = once("ce", make)
        return fwd_bwd(lambda: m["cross_entropy"].LigerCrossEntropyFunction.apply(x, t, None), [x])

    def flce(m):
        def make():
            return (rand(4096, 4096, grad=True, scale=0.1), rand(32000, 4096, grad=True, scale=0.02),
                    torch.randint(0, 32000, (4096,), device=dev, generator=g))
        x, w, t = once("flce", make)
        return fwd_bwd(lambda: m["flce"].LigerFusedLinearCrossEntropyFunction.apply(x, w, t), [x, w])

    def fused_moe(m):
        def make():
            T, H, inter, E, K = 4096, 2048, 1024, 16, 2
            x = rand(T, H, grad=True, scale=0.1)
            w1, w2 = rand(E, 2 * inter, H, grad=True, scale=0.02), rand(E, H, inter, grad=True, scale=0.02)
            logits = torch.randn(T, E, device=dev, generator=g)
            wts, idx = torch.topk(logits.softmax(-1), K, dim=-1)
            return x, w1, w2, idx.to(torch.int32), wts.to(bf16)
        x, w1, w2, idx, wts = once("moe", make)
        return fwd_bwd(lambda: m["fused_moe"].LigerFusedMoEFunction.apply(x, w1, w2, idx, wts), [x, w1, w2])

    def fla_inputs(gated: bool, gla: bool = False):
        B, T, H, D = 4, 4096, 16, 128
        q, k = F.normalize(rand(B, T, H, D), dim=-1), F.normalize(rand(B, T, H, D), dim=-1)
        v = rand(B, T, H, D)
        beta = torch.rand(B, T, H, device=dev, generator=g).sigmoid()
        if gla:
            gate = F.logsigmoid(torch.randn(B, T, H, D, device=dev, generator=g)) / 16
        else:
            gate = F.logsigmoid(torch.randn(B, T, H, device=dev, generator=g)) / 16 if gated else None
        return q, k, v, beta, gate

    def gdn_fwd(m):
        q, k, v, beta, gate = once("gdn", lambda: fla_inputs(True))
        return (lambda: m["gdn"].chunk_gated_delta_rule(q, k, v, gate, beta, output_final_state=True)[0]), []

    def gla_fwd(m):
        q, k, v, _beta, gate = once("gla", lambda: fla_inputs(True, gla=True))
        return (lambda: m["gla"].chunk_gla(q, k, v, gate, output_final_state=True)[0]), []

    def simple_gla_fwd(m):
        q, k, v, _beta, gate = once("sgla", lambda: fla_inputs(True))
        return (lambda: m["simple_gla"].chunk_simple_gla(q, k, v, gate, output_final_state=True)[0]), []

    def delta_fwd_bwd(m):
        def make():
            q, k, v, beta, _ = fla_inputs(False)
            return tuple(t.requires_grad_(True) for t in (q, k, v, beta))
        q, k, v, beta = once("delta", make)
        return fwd_bwd(lambda: m["delta"].chunk_delta_rule(q, k, v, beta)[0], [q, k, v, beta])

    def kda_fwd(m):
        q, k, v, beta, gate = once("kda", lambda: fla_inputs(True, gla=True))
        return (lambda: m["kda"].chunk_kda(q, k, v, gate, beta, output_final_state=True)[0]), []

    return {"rms_norm": rms_norm, "layer_norm": layer_norm, "swiglu": swiglu, "geglu": geglu, "rope": rope,
            "cross_entropy": cross_entropy, "flce": flce, "fused_moe": fused_moe,
            "gdn_fwd": gdn_fwd, "gla_fwd": gla_fwd, "simple_gla_fwd": simple_gla_fwd,
            "delta_fwd_bwd": delta_fwd_bwd, "kda_fwd": kda_fwd}


def gpu_time(torch: Any, call: Callable[[], Any], calls: int) -> float:
    """Milliseconds per call of `calls` back-to-back calls (CUDA events)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def snapshot(torch: Any, call: Callable[[], Any], leaves: list) -> list:
    """The call's output and its leaves' gradients, as float32 copies."""
    out = call()
    torch.cuda.synchronize()
    return [t.detach().float().clone() for t in [out, *[x.grad for x in leaves]] if t is not None]


def rel_diff(a: list, b: list) -> float:
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        scale = max(float(y.abs().max()), 1e-6)
        worst = max(worst, float((x - y).abs().max()) / scale)
    return worst


def kernel_times(torch: Any, call: Callable[[], Any], calls: int = 5) -> dict[str, float]:
    """Microseconds per op call of each GPU kernel the op launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t:
            out[ev.key[:60]] = out.get(ev.key[:60], 0.0) + t / calls
    return out


def _library_modules() -> dict[str, Any]:
    return {n: m for n, m in sys.modules.items() if n.split(".")[0] in ("liger_kernel", "fla")}


def tuned_configs(library_modules: dict[str, Any]) -> dict[str, str]:
    """kernel name -> the configs its autotuner picked so far (Triton's and tegula's
    Autotuner both keep them in `.cache`)."""
    found: dict[str, str] = {}
    for module in library_modules.values():
        for attr, obj in list(vars(module).items()):
            while type(obj).__name__ == "Heuristics":
                obj = obj.fn
            cache = getattr(obj, "cache", None)  # (fla's CachedAutotuner is a subclass)
            if hasattr(obj, "configs") and isinstance(cache, dict) and cache:
                found[attr] = "; ".join(sorted({str(c) for c in cache.values()}))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated op names")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--profile", action="store_true", help="per-kernel GPU times and autotuned configs")
    args = ap.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
    os.environ["TEGULA_CACHE_DIR"] = tempfile.mkdtemp(prefix="tegula-cache-")

    import torch
    import triton  # the real one first

    real_version = triton.__version__
    mods = {"triton": _import_all()}
    copies = {"triton": _library_modules()}
    binding = Binding()
    binding.use("tegula")
    _drop_library_modules()
    mods["tegula"] = _import_all()
    copies["tegula"] = _library_modules()
    assert "tegula" in sys.modules["triton"].__file__, "compat did not take over `import triton`"

    table = ops(torch)
    names = [n for n in table if not args.only or n in args.only.split(",")]
    rows = []
    for name in names:
        row = {"op": name}
        calls, outs = {}, {}
        for who in ("triton", "tegula"):
            binding.use(who)
            try:
                call, leaves = table[name](mods[who])
                t0 = time.perf_counter()
                outs[who] = snapshot(torch, call, leaves)
                row[f"first_{who}"] = time.perf_counter() - t0
                calls[who] = call
            except Exception as e:
                row[f"error_{who}"] = f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}"
                (Path(args.out) / f"libs_bench_{name}_{who}.err").write_text(traceback.format_exc())
        if len(outs) == 2:
            row["diff"] = rel_diff(outs["tegula"], outs["triton"])
        if len(calls) == 2:
            binding.use("tegula")
            n = max(3, min(50, int(50 / max(gpu_time(torch, calls["tegula"], 1), 1e-3))))
            times = {"triton": [], "tegula": []}
            for r in range(args.rounds):
                for who in (("triton", "tegula") if r % 2 == 0 else ("tegula", "triton")):
                    binding.use(who)
                    times[who].append(gpu_time(torch, calls[who], n))
            for who in times:
                row[who] = sorted(times[who])[len(times[who]) // 2]
            ratios = sorted(a / b for a, b in zip(times["triton"], times["tegula"]))
            row["ratio"], row["ratio_lo"], row["ratio_hi"] = ratios[len(ratios) // 2], ratios[0], ratios[-1]
        if args.profile and len(calls) == 2:
            per = {}
            for who in ("triton", "tegula"):
                binding.use(who)
                per[who] = kernel_times(torch, calls[who])
            print(f"  kernels of {name} (us per call): tegula / triton")
            for k in sorted(set(per["triton"]) | set(per["tegula"]),
                            key=lambda k: -max(per["triton"].get(k, 0), per["tegula"].get(k, 0)))[:14]:
                print(f"    {k:60} {per['tegula'].get(k, 0):9.1f} {per['triton'].get(k, 0):9.1f}")
        rows.append(row)
        print(name, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "op"}, flush=True)

    if args.profile:
        for who in ("triton", "tegula"):
            binding.use(who)
            for k, v in tuned_configs(copies[who]).items():
                print(f"  tuned {who:6} {k}: {v}")
    print(f"\nlibs_bench: torch {torch.__version__}, triton {real_version}, {torch.cuda.get_device_name()}")
    print(f"{'op':16} {'tegula ms':>10} {'triton ms':>10} {'tri/teg':>8} {'(lo-hi)':>12} {'rel diff':>9} "
          f"{'1st tegula s':>13} {'1st triton s':>13}")
    for r in rows:
        if "ratio" in r:
            print(f"{r['op']:16} {r['tegula']:10.3f} {r['triton']:10.3f} {r['ratio']:8.3f} "
                  f"{r['ratio_lo']:5.2f}-{r['ratio_hi']:<6.2f} {r.get('diff', float('nan')):9.2e} "
                  f"{r['first_tegula']:13.1f} {r['first_triton']:13.1f}")
        else:
            print(f"{r['op']:16} " + "; ".join(f"{k}: {v}" for k, v in r.items() if k.startswith("error")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
