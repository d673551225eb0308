"""Running a `cuda_kernels.Case` on a real GPU through the backend's own load and
launch path (driver + generated launcher) with torch CUDA tensors; shared by the GPU
tests and `benchmarks/gpu_smoke.py`."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from tegula.backends.cuda import compile_kernel, driver
from tegula.backends.cuda.launcher import make_launcher


def to_device(args: list, torch: Any) -> list:
    return [torch.from_numpy(np.ascontiguousarray(a)).cuda() if isinstance(a, np.ndarray) else a
            for a in args]


def run_case(case: Any, torch: Any, debug: bool = False, timing: bool = False) -> tuple[list, dict]:
    """Compile for the current GPU, launch once on copies of the case's inputs, and
    return (the arguments back on the host as numpy, info)."""
    dev = torch.cuda.current_device()
    cap = driver.capability(dev)
    t0 = time.perf_counter()
    asm, md = compile_kernel(case.kernel, {"num_warps": case.num_warps, "debug": debug}, cap)
    compile_s = time.perf_counter() - t0
    image = asm.get("cubin") or (asm["ptx"].encode() + b"\0")
    _module, fn = driver.load_function(image, md["name"], dev, int(md["shared"]))
    launch = make_launcher(fn, md, md["arg_types"], dev)
    host = case.inputs(np.random.default_rng(1))
    dargs = to_device(host, torch)
    launch(case.grid, dargs)
    torch.cuda.synchronize()
    info = {"compile_s": compile_s, "n_regs": md.get("n_regs"), "n_spills": md.get("n_spills"),
            "shared": md.get("shared"), "cap": cap}
    if timing:
        reps = 20
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            launch(case.grid, dargs)
        info["host_launch_us"] = (time.perf_counter() - t0) / reps * 1e6
        torch.cuda.synchronize()
    out = [a.cpu().numpy() if hasattr(a, "cpu") else a for a in dargs]
    return out, info


def expected(case: Any) -> dict:
    """What the case must produce: the interpreter's result (numpy reference for cases
    marked reference-only)."""
    with np.errstate(all="ignore"):
        if case.extra.get("reference_only"):
            return case.reference(case.inputs(np.random.default_rng(1)))
        from tegula.backends.interpreter import execute
        args = case.inputs(np.random.default_rng(1))
        execute(case.kernel, case.grid, args)
        return {i: args[i] for i in case.outputs}


def compare(case: Any, got: list, want: dict) -> list[str]:
    """Mismatch descriptions (empty when everything matches)."""
    problems = []
    for i, w in want.items():
        g, w = np.asarray(got[i]), np.asarray(w)
        if case.rtol == 0 and case.atol == 0:
            bad = g.reshape(-1) != w.astype(g.dtype).reshape(-1)
            if g.dtype.kind == "f":
                bad &= ~(np.isnan(g.reshape(-1)) & np.isnan(w.reshape(-1).astype(g.dtype)))
        else:
            bad = ~np.isclose(g.astype(np.float64).reshape(-1), w.astype(np.float64).reshape(-1),
                              rtol=case.rtol, atol=case.atol, equal_nan=True)
        if bad.any():
            idx = np.nonzero(bad)[0][:5]
            problems.append(f"arg {i}: {int(bad.sum())} of {bad.size} differ, e.g. at {idx.tolist()}: "
                            f"got {g.reshape(-1)[idx].tolist()} want {w.reshape(-1)[idx].tolist()}")
    return problems
