"""The PTX of the benchmark kernels, compiled ahead of time for sm_80 and sm_90a (no GPU
needed): a digest and the instruction counts of each, so that a change to the CUDA
backend's middle can be checked to leave the generated code the same or better.

    python benchmarks/ptx_corpus.py --save before.json      # record
    python benchmarks/ptx_corpus.py --compare before.json   # diff against a record

`--compare` prints, per kernel, "same" (identical PTX) or the instruction counts that
changed, and exits 1 when any kernel got more instructions of a counted kind.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# PTX instruction families counted (a line's opcode up to its first '.')
COUNTED = ("ld", "st", "cp", "mbarrier", "mma", "wgmma", "ldmatrix", "bar", "shfl", "fma", "add", "mul", "mov", "cvt",
           "setp", "selp", "ex2", "bra")


def _variants():
    """(name, jit function, signature, constexprs, divisibility attrs, options)."""
    from benchmarks.load import load_tegula_kernels

    mod = load_tegula_kernels()
    div16 = lambda *names: {n: 16 for n in names}  # noqa: E731
    yield ("add", mod.add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                   "BLOCK": "constexpr"}, {"BLOCK": 1024}, div16("x_ptr", "y_ptr", "out_ptr", "n"),
           {"num_warps": 4})
    for block in (1024, 4096):
        yield (f"softmax{block}", mod.softmax_kernel,
               {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32", "n_cols": "i32",
                "BLOCK": "constexpr"}, {"BLOCK": block}, div16("out_ptr", "in_ptr", "in_stride", "out_stride"),
               {"num_warps": 8})
    yield ("layernorm", mod.layernorm_kernel,
           {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16", "stride": "i32", "N": "i32",
            "eps": "fp32", "BLOCK": "constexpr"}, {"BLOCK": 4096},
           div16("x_ptr", "y_ptr", "w_ptr", "b_ptr", "stride", "N"), {"num_warps": 8})
    mm_sig = {"a_ptr": "*{t}", "b_ptr": "*{t}", "c_ptr": "*{t}", "M": "i32", "N": "i32", "K": "i32",
              "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
              "stride_cm": "i32", "stride_cn": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
              "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
    for t, (bm, bn, bk, s, w), div in (("fp16", (128, 256, 64, 3, 8), 16), ("bf16", (128, 256, 64, 3, 8), 16),
                                        ("fp16", (128, 128, 64, 4, 4), 8), ("fp16", (64, 64, 32, 1, 4), 16),
                                        ("fp32", (64, 64, 32, 3, 4), 16), ("fp8e4nv", (128, 256, 128, 3, 8), 16)):
        sig = {k: v.format(t=t) for k, v in mm_sig.items()}
        cx = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
              "GROUP_M": 8}
        attrs = {k: 16 for k in ("a_ptr", "b_ptr", "c_ptr")}
        attrs.update({k: div for k in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
        yield (f"matmul_{t}_{bm}x{bn}x{bk}_s{s}w{w}_d{div}", mod.matmul_kernel, sig, cx, attrs,
               {"num_warps": w, "num_stages": s})
    for t, (bm, bn, bk, s, w) in (("fp16", (128, 256, 64, 3, 8)), ("fp16", (64, 64, 32, 1, 4))):
        sig = {k: v.format(t=t) for k, v in mm_sig.items()}
        cx = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
              "GROUP_M": 8}
        attrs = div16("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm")
        yield (f"matmul_block_ptr_{t}_{bm}x{bn}x{bk}_s{s}w{w}", mod.matmul_block_ptr_kernel, sig, cx, attrs,
               {"num_warps": w, "num_stages": s})
    desc_sig = {"a_ptr": "*{t}", "b_ptr": "*{t}", "c_ptr": "*{t}", "M": "i32", "N": "i32", "K": "i32",
                "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32", "BLOCK_M": "constexpr",
                "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
    for t, (bm, bn, bk, s, w) in (("fp16", (128, 256, 64, 3, 8)), ("bf16", (128, 128, 64, 4, 4))):
        sig = {k: v.format(t=t) for k, v in desc_sig.items()}
        cx = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}
        attrs = div16("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm")
        yield (f"matmul_desc_{t}_{bm}x{bn}x{bk}_s{s}w{w}", mod.matmul_desc_kernel, sig, cx, attrs,
               {"num_warps": w, "num_stages": s})
    # tutorial 08: descriptors made in the kernel from pointers and sizes loaded from tables
    grouped_sig = {"group_a_ptrs": "*u64", "group_b_ptrs": "*u64", "group_c_ptrs": "*u64",
                   "group_gemm_sizes": "*i32", "g_lds": "*i32", "group_size": "i32", "NUM_SM": "constexpr",
                   "BLOCK_SIZE_M": "constexpr", "BLOCK_SIZE_N": "constexpr", "BLOCK_SIZE_K": "constexpr",
                   "FP8": "constexpr"}
    for bm, bn, bk, s, w in ((128, 128, 64, 3, 4), (128, 256, 64, 4, 8)):
        cx = {"NUM_SM": 132, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "FP8": False}
        attrs = div16("group_a_ptrs", "group_b_ptrs", "group_c_ptrs", "group_gemm_sizes", "g_lds")
        yield (f"grouped_desc_fp16_{bm}x{bn}x{bk}_s{s}w{w}", mod.grouped_matmul_desc_kernel, grouped_sig, cx, attrs,
               {"num_warps": w, "num_stages": s})
    for d in (64, 128):
        for causal in (False, True):
            sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "out_ptr": "*fp16", "sm_scale": "fp32",
                   "stride_z": "i32", "stride_h": "i32", "stride_n": "i32", "stride_d": "constexpr", "H": "i32",
                   "N_CTX": "i32", "HEAD_DIM": "constexpr", "CAUSAL": "constexpr", "BLOCK_M": "constexpr",
                   "BLOCK_N": "constexpr"}
            cx = {"stride_d": 1, "HEAD_DIM": d, "CAUSAL": causal, "BLOCK_M": 128, "BLOCK_N": 64}
            attrs = div16("q_ptr", "k_ptr", "v_ptr", "out_ptr", "stride_z", "stride_h", "stride_n", "N_CTX")
            yield (f"attention_d{d}{'_causal' if causal else ''}", mod.attention_fwd_kernel, sig, cx, attrs,
                   {"num_warps": 8, "num_stages": 3})


def counts(ptx: str) -> dict[str, int]:
    ops: dict[str, int] = {}
    for m in re.finditer(r"^\s*(?:@!?%p\d+\s+)?([a-z][a-z0-9_]*)[.\s;]", ptx, re.M):
        if m.group(1) in COUNTED:
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    return ops


def corpus() -> dict[str, dict]:
    import tegula
    from tegula.backends.compiler import GPUTarget
    from tegula.compiler import ASTSource

    out = {}
    for name, fn, sig, cx, attrs, opts in _variants():
        for arch in (80, 90):
            ck = tegula.compile(ASTSource(fn, sig, cx, attrs=attrs), target=GPUTarget("cuda", arch, 32),
                                options=opts)
            ptx = ck.asm["ptx"]
            out[f"{name}@sm{arch}"] = {"sha": hashlib.sha256(ptx.encode()).hexdigest()[:16], "counts": counts(ptx),
                                       "shared": ck.metadata.get("shared") if isinstance(ck.metadata, dict)
                                       else getattr(ck.metadata, "shared", None)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save")
    ap.add_argument("--compare")
    args = ap.parse_args()
    now = corpus()
    if args.save:
        Path(args.save).write_text(json.dumps(now, indent=1, sort_keys=True))
    worse = 0
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        for key, rec in now.items():
            old = before.get(key)
            if old is None:
                print(f"{key:50s} new")
                continue
            if old["sha"] == rec["sha"]:
                print(f"{key:50s} same")
                continue
            diff = {k: (old["counts"].get(k, 0), rec["counts"].get(k, 0)) for k in COUNTED
                    if old["counts"].get(k, 0) != rec["counts"].get(k, 0)}
            worse += any(b > a for a, b in diff.values())
            print(f"{key:50s} changed {diff or '(same counts)'} shared {old['shared']} -> {rec['shared']}")
    elif not args.save:
        for key, rec in now.items():
            print(f"{key:50s} {rec['sha']} {rec['counts']}")
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
