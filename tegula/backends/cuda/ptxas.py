"""Finding and running `ptxas`: PTX → cubin, and its `-v` resource report parsed into
metadata (registers, spill bytes, static shared memory)."""
from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import tempfile
from typing import Optional

from ...config import knobs
from ...errors import CompilationError


def find_ptxas() -> Optional[str]:
    """`TEGULA_PTXAS_PATH`, then PATH, then `CUDA_HOME/bin`, then the nvidia-cuda-nvcc
    wheel; None when there is none (the driver then JIT-compiles the PTX)."""
    return _find(knobs.ptxas, knobs.cuda_home)


@functools.lru_cache(maxsize=8)
def _find(explicit: str, cuda_home: str) -> Optional[str]:
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("ptxas")
    if found:
        return found
    for home in (cuda_home, "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "ptxas"), os.X_OK):
            return os.path.join(home, "bin", "ptxas")
    try:
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]
        for root in getattr(wheel, "__path__", []):
            for p in glob.glob(os.path.join(root, "bin", "ptxas")):
                if os.access(p, os.X_OK):
                    return p
    except ImportError:
        pass
    return None


@functools.lru_cache(maxsize=8)
def ptxas_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else "unknown"


def parse_report(log: str) -> dict[str, int]:
    """Registers, spills and static shared memory from `ptxas -v`."""
    info = {"n_regs": 0, "n_spills": 0, "spill_loads": 0, "static_shared": 0, "stack": 0}
    m = re.search(r"Used (\d+) registers", log)
    if m:
        info["n_regs"] = int(m.group(1))
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        info["n_spills"], info["spill_loads"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"(\d+) bytes smem", log)
    if m:
        info["static_shared"] = int(m.group(1))
    m = re.search(r"(\d+) bytes stack frame", log)
    if m:
        info["stack"] = int(m.group(1))
    return info


def with_register_cap(ptx: str, maxnreg: int) -> str:
    """`ptx` with a `.maxnreg` directive on each kernel entry (replacing one it had).
    ptxas ignores `--maxrregcount` for entries declaring `.reqntid`, as tegula's do; the
    directive is what Triton emits for `maxnreg` too."""
    out = []
    for line in ptx.splitlines():
        if line.startswith(".maxnreg "):
            continue
        out.append(line)
        if line.startswith(".reqntid ") or line.startswith(".maxntid "):
            out.append(f".maxnreg {int(maxnreg)}")
    return "\n".join(out) + ("\n" if ptx.endswith("\n") else "")


def assemble(ptx: str, arch: str, *, maxnreg: Optional[int] = None, lineinfo: bool = True,
             ptxas: Optional[str] = None) -> tuple[bytes, dict[str, int], str]:
    """(cubin, parsed report, raw log) of `ptx` for `arch` (e.g. `sm_90a`); `maxnreg`
    caps the registers per thread (through `with_register_cap`)."""
    if maxnreg:
        ptx = with_register_cap(ptx, maxnreg)
    exe = ptxas or find_ptxas()
    if exe is None:
        raise FileNotFoundError("ptxas not found")
    with tempfile.TemporaryDirectory(prefix="tegula-ptxas-") as d:
        src, dst = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [exe, f"-arch={arch}", "-v", "-O3", src, "-o", dst]
        if lineinfo:
            cmd.insert(1, "-lineinfo")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise CompilationError(f"ptxas failed for {arch}:\n{log.strip()}")
        with open(dst, "rb") as f:
            return f.read(), parse_report(log), log
