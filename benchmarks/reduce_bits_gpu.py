"""Do tegula's reductions give Triton's bits? The same kernel sources compiled by both
(GPU machine, torch + triton installed), fresh random inputs whose sums cancel, and per
case the count of output elements whose bits differ and the largest difference in
units of the result's last place.

    python3 benchmarks/reduce_bits_gpu.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOURCE = '''
@triton.jit
def row_sum(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * N + offs, mask=offs < N, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x))

@triton.jit
def row_dot(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + tl.program_id(0) * N + offs, mask=offs < N, other=0.0)
        y = tl.load(y_ptr + tl.program_id(0) * N + offs, mask=offs < N, other=0.0)
        acc += x * y
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc))

@triton.jit
def tile_sum(x_ptr, out_ptr, M, N, AXIS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
    s = tl.sum(x.to(tl.float32), axis=AXIS)
    if AXIS == 1:
        tl.store(out_ptr + rm, s, mask=rm < M)
    else:
        tl.store(out_ptr + tl.program_id(0) * BN + rn, s, mask=rn < N)

@triton.jit
def softmax_row(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * N + offs, mask=offs < N, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(out_ptr + tl.program_id(0) * N + offs, e / tl.sum(e, 0), mask=offs < N)

@triton.jit
def dot_row_sum(a_ptr, b_ptr, out_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + rm, tl.sum(acc, axis=1))
'''


def _module(name: str, triton_mod, tl_mod):
    import types

    mod = types.ModuleType(name)
    mod.triton, mod.tl = triton_mod, tl_mod
    path = Path(f"/tmp/reduce_bits_{name}.py")
    path.write_text("import triton\nimport triton.language as tl\n" + SOURCE)
    code = compile("\n" * 2 + SOURCE, str(path), "exec")
    exec(code, mod.__dict__)
    return mod


def main() -> int:
    import numpy as np
    import torch
    import triton as real_triton
    import triton.language as real_tl

    import tegula
    import tegula.language as ttl

    tri = _module("triton_side", real_triton, real_tl)
    teg = _module("tegula_side", tegula, ttl)
    g = torch.Generator(device="cuda").manual_seed(0)

    def cancelling(*shape, dtype=torch.float32):
        x = torch.randn(*shape, device="cuda", generator=g, dtype=torch.float32)
        x -= x.mean(dim=-1, keepdim=True)
        return x.to(dtype)

    # (name, kernel, arguments with OUT where the output goes, output shape, constexprs,
    # warps, programs)
    OUT = object()
    cases = []
    for n, block, warps in ((8192, 8192, 4), (8192, 8192, 8), (4000, 4096, 4), (1000, 1024, 4), (3000, 4096, 16),
                            (32768, 32768, 16), (128, 128, 1)):
        cases.append((f"row_sum N{n} B{block} w{warps}", "row_sum", (cancelling(64, n), OUT, n), (64,),
                      {"BLOCK": block}, warps, 64))
    for n, block, warps in ((8192, 1024, 4), (5000, 2048, 8)):
        cases.append((f"row_dot N{n} B{block} w{warps}", "row_dot", (cancelling(64, n), cancelling(64, n), OUT, n),
                      (64,), {"BLOCK": block}, warps, 64))
    for m, n, axis, bm, bn, warps, dt in ((256, 512, 1, 16, 512, 4, torch.float32),
                                          (256, 512, 0, 64, 512, 4, torch.float32),
                                          (300, 100, 1, 32, 128, 4, torch.float16),
                                          (512, 64, 0, 128, 64, 8, torch.float32),
                                          (1024, 256, 1, 8, 256, 2, torch.bfloat16)):
        programs = (m + bm - 1) // bm
        cases.append((f"tile_sum {m}x{n} axis{axis} {bm}x{bn} w{warps} {str(dt)[6:]}", "tile_sum",
                      (cancelling(m, n, dtype=dt), OUT, m, n), (m if axis == 1 else programs * bn,),
                      {"AXIS": axis, "BM": bm, "BN": bn}, warps, programs))
    for n, block, warps in ((1000, 1024, 4), (8192, 8192, 8)):
        cases.append((f"softmax N{n} w{warps}", "softmax_row", (torch.randn(64, n, device="cuda", generator=g), OUT, n),
                      (64, n), {"BLOCK": block}, warps, 64))
    for bm, bn, bk, warps in ((64, 64, 32, 4), (128, 128, 64, 8)):
        k = 256
        a = torch.randn(bm, k, device="cuda", generator=g, dtype=torch.float16)
        b = torch.randn(k, bn, device="cuda", generator=g, dtype=torch.float16)
        cases.append((f"dot_row_sum {bm}x{bn}x{bk} w{warps}", "dot_row_sum", (a, b, OUT, k), (bm,),
                      {"BM": bm, "BN": bn, "BK": bk}, warps, 1))

    def ordered(bits):  # f32 bit patterns as integers in the floats' order (ulp distance)
        bits = bits.astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)

    rows = []
    for name, kern, args, out_shape, cx, warps, programs in cases:
        outs = []
        for mod in (tri, teg):
            out = torch.zeros(out_shape, device="cuda", dtype=torch.float32)
            getattr(mod, kern)[(programs,)](*[out if a is OUT else a for a in args], **cx, num_warps=warps)
            torch.cuda.synchronize()
            outs.append(out.cpu().numpy().view(np.int32))
        t, o = outs
        rows.append((name, t.size, int((t != o).sum()), int(np.abs(ordered(t) - ordered(o)).max())))
    print(f"{'case':45s} {'outputs':>8s} {'differ':>7s} {'max ulps':>9s}")
    for name, size, differ, ulps in rows:
        print(f"{name:45s} {size:8d} {differ:7d} {ulps:9d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
