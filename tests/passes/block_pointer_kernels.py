"""Block-pointer kernels shared by the IR, pass and backend tests: each pattern the
desugaring must handle — a block pointer advanced in a `for` loop (a matmul), loads
padded with zero or NaN and checked on some dimensions only, a block pointer returned
from an `if`, one carried through a `while` loop, stores, bool elements — with the
signatures and constexprs they compile with (`CASES`), and fresh random inputs for
each (`inputs`)."""
from __future__ import annotations

import numpy as np

import tegula
import tegula.language as tl


@tegula.jit
def matmul_bp(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    a = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pm * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pn * BN), (BK, BN), (0, 1))
    acc = tl.zeros((BM, BN), tl.float32)
    for _k in range(0, K, BK):
        x = tl.load(a, boundary_check=(0, 1), padding_option="zero")
        y = tl.load(b, boundary_check=(0, 1))
        acc += tl.dot(x, y, input_precision="ieee")
        a = tl.advance(a, (0, BK))
        b = tl.advance(b, (BK, 0))
    c = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(c, acc, boundary_check=(0, 1))


@tegula.jit
def row_sums(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    """Each program sums its row of x in BLOCK-wide steps: a block pointer advanced in a
    `for` loop (the golden-text kernel)."""
    p = tl.make_block_ptr(x_ptr + tl.program_id(0) * stride, (n,), (1,), (-BLOCK,), (BLOCK,), (0,))
    p = tl.advance(p, (BLOCK,))
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(0, n, BLOCK):
        acc += tl.load(p, boundary_check=(0,))
        p = tl.advance(p, (BLOCK,))
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@tegula.jit
def pad_1d(x_ptr, out_ptr, n, stride, NAN: tl.constexpr, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (n,), (stride,), (tl.program_id(0) * BLOCK - 4,), (BLOCK,), (0,))
    if NAN:
        v = tl.load(p, boundary_check=(0,), padding_option="nan")
    else:
        v = tl.load(p, boundary_check=0)
    q = tl.make_block_ptr(out_ptr, (2 * BLOCK,), (1,), (tl.program_id(0) * BLOCK,), (BLOCK,), (0,))
    tl.store(q, v)


@tegula.jit
def checked_dims_3d(x_ptr, y_ptr, A, B, C, sa, sb, CHECK: tl.constexpr, BA: tl.constexpr, BB: tl.constexpr,
                    BC: tl.constexpr):
    """A 3-D block, the last ones partly beyond the tensor, checked on `CHECK` dims only
    (the callers' buffers extend past the tensor, so unchecked dims stay in memory)."""
    offs = (tl.program_id(0) * BA, tl.program_id(1) * BB, tl.program_id(2) * BC)
    src = tl.make_block_ptr(x_ptr, (A, B, C), (sa, sb, 1), offs, (BA, BB, BC), (2, 1, 0))
    dst = tl.make_block_ptr(y_ptr, (A, B, C), (sa, sb, 1), offs, (BA, BB, BC), (2, 1, 0))
    t = tl.load(src, boundary_check=CHECK, padding_option="zero")
    tl.store(dst, t * 2 + 1, boundary_check=CHECK)


@tegula.jit
def branch_merge(x_ptr, out_ptr, n):
    p = tl.make_block_ptr(x_ptr, (n, 8), (8, 1), (0, 0), (4, 8), (1, 0))
    if tl.program_id(0) == 1:  # a block pointer merged from two branches (runtime condition)
        p = tl.advance(p, (2, 0))
        q = tl.make_block_ptr(out_ptr, (8, 8), (8, 1), (4, 0), (4, 8), (1, 0))
    else:
        q = tl.make_block_ptr(out_ptr, (8, 8), (8, 1), (0, 0), (4, 8), (1, 0))
    v = tl.load(p, boundary_check=(0,))
    tl.store(q, v * 2 + tl.program_id(0))


@tegula.jit
def while_walk(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Sums the blocks of a row up to `n`: the block pointer is carried by a `while`."""
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    acc = tl.zeros((BLOCK,), tl.float32)
    i = 0
    while i < n:
        acc += tl.load(p, boundary_check=(0,))
        p = tl.advance(p, (BLOCK,))
        i += BLOCK
    q = tl.make_block_ptr(out_ptr, (BLOCK,), (1,), (0,), (BLOCK,), (0,))
    tl.store(q, acc)


@tegula.jit
def bool_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (off,), (BLOCK,), (0,))
    dst = tl.make_block_ptr(y_ptr, (n,), (1,), (off,), (BLOCK,), (0,))
    tl.store(dst, tl.load(src, boundary_check=(0,)) == 0, boundary_check=(0,))


_MM_SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "sam": "i32",
           "sak": "i32", "sbk": "i32", "sbn": "i32", "scm": "i32", "scn": "i32", "BM": "constexpr",
           "BN": "constexpr", "BK": "constexpr"}
_3D_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "A": "i32", "B": "i32", "C": "i32", "sa": "i32", "sb": "i32",
           "CHECK": "constexpr", "BA": "constexpr", "BB": "constexpr", "BC": "constexpr"}

# name -> (kernel, signature, constexprs)
CASES = {
    "matmul": (matmul_bp, _MM_SIG, {"BM": 16, "BN": 16, "BK": 16}),
    "row_sums": (row_sums, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "stride": "i32",
                            "BLOCK": "constexpr"}, {"BLOCK": 16}),
    "pad_zero": (pad_1d, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "stride": "i32", "NAN": "constexpr",
                          "BLOCK": "constexpr"}, {"NAN": False, "BLOCK": 16}),
    "pad_nan": (pad_1d, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "stride": "i32", "NAN": "constexpr",
                         "BLOCK": "constexpr"}, {"NAN": True, "BLOCK": 16}),
    "check_0": (checked_dims_3d, _3D_SIG, {"CHECK": (0,), "BA": 2, "BB": 4, "BC": 8}),
    "check_1": (checked_dims_3d, _3D_SIG, {"CHECK": (1,), "BA": 2, "BB": 4, "BC": 8}),
    "check_2": (checked_dims_3d, _3D_SIG, {"CHECK": (2,), "BA": 2, "BB": 4, "BC": 8}),
    "check_all": (checked_dims_3d, _3D_SIG, {"CHECK": (0, 1, 2), "BA": 2, "BB": 4, "BC": 8}),
    "branch": (branch_merge, {"x_ptr": "*i32", "out_ptr": "*i32", "n": "i32"}, {}),
    "while": (while_walk, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 16}),
    "bool": (bool_copy, {"x_ptr": "*i1", "y_ptr": "*i1", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 32}),
}


def inputs(name: str, rng: np.random.Generator) -> tuple[tuple[int, int, int], list]:
    """(grid, arguments) of a case on fresh random inputs whose sizes are not multiples
    of the blocks; pointer arguments are numpy arrays."""
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    if name == "matmul":
        m, n, k = rng.integers(17, 60, 3)
        b = f32(n, k)  # read as b.T through strides (1, k): the block pointer's order (0, 1)
        return (-(-m // 16), -(-n // 16), 1), [f32(m, k), b, np.zeros((m, n), np.float32), m, n, k, k, 1, 1, k,
                                               n, 1]
    if name == "row_sums":
        n = int(rng.integers(20, 70))
        return (3, 1, 1), [f32(3 * n), np.zeros(3, np.float32), n, n]
    if name.startswith("pad"):
        return (2, 1, 1), [f32(20), np.zeros(32, np.float32), 10, 2]
    if name.startswith("check"):
        a, b, c = 3, 7, 19  # the buffers extend a block past the tensor in every dimension
        x = f32(a + 2, b + 4, c + 8)
        return (2, 2, 3), [x, np.zeros_like(x), a, b, c, x.shape[1] * x.shape[2], x.shape[2]]
    if name == "branch":
        return (2, 1, 1), [rng.integers(-99, 99, 48).astype(np.int32), np.zeros(64, np.int32), 6]
    if name == "while":
        n = int(rng.integers(17, 70))
        return (1, 1, 1), [f32(n), np.zeros(16, np.float32), n]
    assert name == "bool"
    n = int(rng.integers(33, 96))
    return (3, 1, 1), [rng.integers(0, 2, n).astype(bool), np.ones(n, bool), n]
