"""The instruction mix of the benchmark matmul, per target: which tensor-core path the
compiled code is on (HMMA = mma.sync, HGMMA = wgmma), and how much of it is shared-
memory traffic, global loads, FMAs or spills.

    python benchmarks/sass_mix.py [--config BM BN BK STAGES WARPS] [--dtype float16] [--desc]

`--desc` takes the tensor-descriptor matmul (`matmul_desc_kernel`: TMA on sm_90a,
UTMALDG in SASS, its mbarrier operations SYNCS) instead of the pointer one.

tegula's kernel is compiled ahead of time for sm_80 and sm_90a (no GPU needed); with
`cuobjdump` (or `nvdisasm`) on PATH the cubins are disassembled, else the PTX is
counted. When the real Triton and a GPU are present, Triton's cubin for the same source
and config is counted beside it.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SASS_OPS = ("HGMMA", "HMMA", "IMMA", "LDSM", "LDS", "STS", "LDGSTS", "UTMALDG", "SYNCS", "LDG", "STG", "FFMA", "BAR",
            "LDL", "STL")
PTX_OPS = ("wgmma.mma_async", "mma.sync", "ldmatrix", "ld.shared", "st.shared", "cp.async.bulk.tensor",
           "cp.async.cg", "mbarrier.try_wait", "ld.global",
           "st.global", "fma.rn.f32", "bar.sync", "ld.local", "st.local")


def sass_text(cubin: bytes) -> str | None:
    """The disassembly of a cubin (None without cuobjdump / nvdisasm)."""
    tool = shutil.which("cuobjdump") or shutil.which("nvdisasm")
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        args = [tool, "--dump-sass", f.name] if tool.endswith("cuobjdump") else [tool, f.name]
        return subprocess.run(args, capture_output=True, text=True, timeout=120).stdout
    finally:
        os.unlink(f.name)


def sass_counts(cubin: bytes) -> dict[str, int] | None:
    text = sass_text(cubin)
    if text is None:
        return None
    line = r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9.]+)"
    ops = collections.Counter(m.group(1).split(".")[0] for m in re.finditer(line, text))
    return {k: ops.get(k, 0) for k in SASS_OPS}


def ptx_counts(ptx: str) -> dict[str, int]:
    return {k: len(re.findall(re.escape(k), ptx)) for k in PTX_OPS}


def tegula_compile(arch: int, dtype: str, cfg: tuple[int, ...], desc: bool = False):
    import tegula
    from benchmarks.load import load_tegula_kernels
    from tegula.backends.compiler import GPUTarget
    from tegula.compiler import ASTSource

    bm, bn, bk, stages, warps = cfg
    t = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32"}[dtype]
    mod = load_tegula_kernels()
    if desc:
        sig = {"a_ptr": t, "b_ptr": t, "c_ptr": t, "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
               "stride_bk": "i32", "stride_cm": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
               "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
        src = ASTSource(mod.matmul_desc_kernel, sig, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                        attrs={k: 16 for k, v in sig.items() if v != "constexpr"})
        return tegula.compile(src, target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": warps, "num_stages": stages})
    sig = {"a_ptr": t, "b_ptr": t, "c_ptr": t, "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
           "stride_cm": "i32", "stride_cn": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
    cx = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}
    src = ASTSource(mod.matmul_kernel, sig, cx, attrs={k: 16 for k in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K",
                                                                      "stride_am", "stride_bk", "stride_cm")})
    return tegula.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps, "num_stages": stages})


def triton_cubin(dtype: str, cfg: tuple[int, ...]) -> bytes | None:
    try:
        import torch

        from benchmarks.load import load_triton_kernels
        if not torch.cuda.is_available():
            return None
        mod = load_triton_kernels()
        if mod is None:
            return None
    except ImportError:
        return None
    bm, bn, bk, stages, warps = cfg
    a = torch.randn(512, 512, device="cuda", dtype=getattr(torch, dtype))
    c = torch.empty_like(a)
    k = mod.matmul_kernel[(1,)](a, a, c, 512, 512, 512, 512, 1, 512, 1, 512, 1, BLOCK_M=bm, BLOCK_N=bn,
                                BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)
    return k.asm["cubin"]


def dump(folder: str, name: str, text: str) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    Path(folder, f"{name}.sass").write_text(text)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", nargs=5, type=int, default=(128, 256, 64, 3, 8))
    p.add_argument("--dtype", default="float16")
    p.add_argument("--desc", action="store_true", help="the tensor-descriptor matmul (TMA on sm_90a)")
    p.add_argument("--dump", default=None, help="write each kernel's SASS (or PTX) into this folder")
    a = p.parse_args()
    cfg = tuple(a.config)
    rows = []
    for arch in (80, 90):
        ck = tegula_compile(arch, a.dtype, cfg, a.desc)
        md = ck.metadata
        counts = sass_counts(ck.asm["cubin"]) if "cubin" in ck.asm else None
        kind = "sass" if counts else "ptx"
        if a.dump:
            dump(a.dump, f"tegula_sm{arch}", sass_text(ck.asm["cubin"]) if counts else ck.asm["ptx"])
        rows.append((f"tegula sm_{arch}", kind, counts or ptx_counts(ck.asm["ptx"]),
                     f"regs {getattr(md, 'n_regs', '?')} spills {getattr(md, 'n_spills', '?')} smem {md.shared}"))
    cub = None if a.desc else triton_cubin(a.dtype, cfg)
    if cub is not None:
        counts = sass_counts(cub)
        if a.dump and counts:
            dump(a.dump, "triton", sass_text(cub))
        if counts:
            rows.append(("triton (this GPU)", "sass", counts, ""))
    print(f"matmul{' (descriptors)' if a.desc else ''} {a.dtype} config {cfg}")
    for name, kind, counts, extra in rows:
        print(f"{name:18} {kind:4} " + " ".join(f"{k}={v}" for k, v in counts.items() if v) + f"  {extra}")


if __name__ == "__main__":
    main()
