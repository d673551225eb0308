"""Grouped GEMM: many independent fp16 matmuls C_i = A_i @ B_i of different sizes in one launch.

A mixture-of-experts layer or a batch of LoRA adapters multiplies a list of matrices
whose shapes differ, too small one by one to fill the GPU. Here NUM_SM persistent
programs walk one flattened tile space: the tiles of problem 0, then those of problem
1, and so on; program p takes tiles p, p + NUM_SM, p + 2 * NUM_SM, ... across all the
problems, so the work is balanced however the sizes differ. The kernel finds each
problem from tables on the device: the sizes (M, N, K), the leading dimensions, and
the addresses of A_i, B_i, C_i as int64 `data_ptr()`s, turned back into typed pointers
with `.to(tl.pointer_type(tl.float16))` (the pattern of Triton's tutorial 08).

Two variants of the same schedule:
  - pointer tables: blocks of pointers with masks for the ragged edges;
  - tensor descriptors: `tl.make_tensor_descriptor` built in the kernel per problem;
    loads pad out-of-bounds elements with zeros and stores clip, so no masks (on a
    Hopper GPU under Triton these become TMA copies, which need
    `triton.set_allocator` for the descriptors' scratch memory).
`tl.multiple_of` tells the compiler that the leading dimensions are multiples of 8
elements (16-byte rows, the width of a vector load and what TMA needs); `grouped_gemm`
checks that promise on the host before launching.

    python examples/09_grouped_gemm.py [--groups G] [--small]
"""
import argparse
import sys

try:
    import torch
except ModuleNotFoundError:  # the examples are standalone scripts: say what is missing
    raise SystemExit("this example compares against PyTorch: pip install -e '.[test]' "
                     "(or pip install torch)") from None

import tegula as triton
import tegula.language as tl

ON_GPU = torch.cuda.is_available()


def num_sms():
    return torch.cuda.get_device_properties("cuda").multi_processor_count if ON_GPU else 4


def grouped_configs():
    if not ON_GPU:  # a few programs, so that each walks tiles of several problems
        return [triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "NUM_SM": 4},
                              num_warps=4, num_stages=2)]
    shapes = [(128, 128, 32, 3, 4), (128, 128, 64, 3, 8), (64, 128, 64, 4, 4), (128, 256, 64, 3, 8),
              (64, 64, 32, 4, 4)]  # (BM, BN, BK, stages, warps)
    return [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "NUM_SM": num_sms()},
                          num_stages=s, num_warps=w) for bm, bn, bk, s, w in shapes]


@triton.autotune(configs=grouped_configs(), key=["group_size", "total_flops"])
@triton.jit
def grouped_matmul_kernel(a_table, b_table, c_table, sizes, lds, group_size, total_flops,
                          NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                          BLOCK_SIZE_K: tl.constexpr):
    # total_flops is only an autotuning key: the best tiles depend on the problem sizes.
    tile = tl.program_id(0)
    first_tile = 0  # the flattened index of problem g's first tile
    for g in range(group_size):
        m = tl.load(sizes + 3 * g)
        n = tl.load(sizes + 3 * g + 1)
        k = tl.load(sizes + 3 * g + 2)
        tiles_n = tl.cdiv(n, BLOCK_SIZE_N)
        num_tiles = tl.cdiv(m, BLOCK_SIZE_M) * tiles_n
        # A while, not an if: one program may own several tiles of the same problem.
        while tile >= first_tile and tile < first_tile + num_tiles:
            lda = tl.multiple_of(tl.load(lds + 3 * g), 8)
            ldb = tl.multiple_of(tl.load(lds + 3 * g + 1), 8)
            ldc = tl.multiple_of(tl.load(lds + 3 * g + 2), 8)
            a_ptr = tl.load(a_table + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(b_table + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(c_table + g).to(tl.pointer_type(tl.float16))
            tile_m = (tile - first_tile) // tiles_n
            tile_n = (tile - first_tile) % tiles_n
            rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            ks = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + rows[:, None] * lda + ks[None, :]
            b_ptrs = b_ptr + ks[:, None] * ldb + cols[None, :]
            acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                k_left = k - kk * BLOCK_SIZE_K  # ragged edges: masked lanes read zeros
                a = tl.load(a_ptrs, mask=(rows[:, None] < m) & (ks[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=(ks[:, None] < k_left) & (cols[None, :] < n), other=0.0)
                acc = tl.dot(a, b, acc)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c_ptrs = c_ptr + rows[:, None] * ldc + cols[None, :]
            tl.store(c_ptrs, acc.to(tl.float16), mask=(rows[:, None] < m) & (cols[None, :] < n))
            tile += NUM_SM
        first_tile += num_tiles


@triton.autotune(configs=grouped_configs(), key=["group_size", "total_flops"])
@triton.jit
def grouped_matmul_descriptor_kernel(a_table, b_table, c_table, sizes, lds, group_size, total_flops,
                                     NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                                     BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    tile = tl.program_id(0)
    first_tile = 0
    for g in range(group_size):
        m = tl.load(sizes + 3 * g)
        n = tl.load(sizes + 3 * g + 1)
        k = tl.load(sizes + 3 * g + 2)
        tiles_n = tl.cdiv(n, BLOCK_SIZE_N)
        num_tiles = tl.cdiv(m, BLOCK_SIZE_M) * tiles_n
        while tile >= first_tile and tile < first_tile + num_tiles:
            lda = tl.multiple_of(tl.load(lds + 3 * g), 8)
            ldb = tl.multiple_of(tl.load(lds + 3 * g + 1), 8)
            ldc = tl.multiple_of(tl.load(lds + 3 * g + 2), 8)
            a_ptr = tl.load(a_table + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(b_table + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(c_table + g).to(tl.pointer_type(tl.float16))
            # The descriptors know each matrix's shape: reads past it give zeros and
            # writes past it are dropped, which handles the ragged edges.
            a_desc = tl.make_tensor_descriptor(a_ptr, shape=[m, k], strides=[lda, 1],
                                               block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[k, n], strides=[ldb, 1],
                                               block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N])
            c_desc = tl.make_tensor_descriptor(c_ptr, shape=[m, n], strides=[ldc, 1],
                                               block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
            off_m = ((tile - first_tile) // tiles_n) * BLOCK_SIZE_M
            off_n = ((tile - first_tile) % tiles_n) * BLOCK_SIZE_N
            acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                a = a_desc.load([off_m, kk * BLOCK_SIZE_K])
                b = b_desc.load([kk * BLOCK_SIZE_K, off_n])
                acc = tl.dot(a, b, acc)
            c_desc.store([off_m, off_n], acc.to(tl.float16))
            tile += NUM_SM
        first_tile += num_tiles


def _scratch(size, alignment, stream):
    """Device memory for descriptors built in a kernel (Triton 3.6 asks for it; tegula
    lowers them to pointer arithmetic today and never calls this)."""
    return torch.empty(size, device="cuda", dtype=torch.int8)


def grouped_gemm(group_a, group_b, use_descriptors=False):
    """[a @ b for a, b in zip(group_a, group_b)] in float16, in one launch."""
    assert len(group_a) == len(group_b) and group_a, "one B per A, at least one problem"
    device = group_a[0].device
    group_c, sizes, lds, flops = [], [], [], 0
    for a, b in zip(group_a, group_b):
        assert a.dtype == b.dtype == torch.float16 and a.shape[1] == b.shape[0], "fp16 a (M x K), b (K x N)"
        assert a.stride(1) == b.stride(1) == 1, "row-major A and B"
        (m, k), n = a.shape, b.shape[1]
        c = torch.empty((m, n), device=device, dtype=torch.float16)
        # The kernel's tl.multiple_of(ld, 8) is a promise: keep it, or the GPU would
        # issue misaligned 16-byte loads.
        assert all(s % 8 == 0 for s in (a.stride(0), b.stride(0), c.stride(0))), \
            "leading dimensions must be multiples of 8 elements (16 bytes)"
        group_c.append(c)
        sizes += [m, n, k]
        lds += [a.stride(0), b.stride(0), c.stride(0)]
        flops += 2 * m * n * k

    def table(ts):
        return torch.tensor([t.data_ptr() for t in ts], device=device, dtype=torch.int64)

    args = (table(group_a), table(group_b), table(group_c),
            torch.tensor(sizes, device=device, dtype=torch.int32),
            torch.tensor(lds, device=device, dtype=torch.int32), len(group_a), flops)
    if use_descriptors:
        if device.type == "cuda":
            triton.set_allocator(_scratch)
        kernel = grouped_matmul_descriptor_kernel
    else:
        kernel = grouped_matmul_kernel
    kernel[lambda meta: (meta["NUM_SM"],)](*args)
    return group_c


def problem_shapes(groups, big):
    """(M, N, K) per problem: all different, none a multiple of the blocks, N and K
    multiples of 8 (the 16-byte rows the kernels' hints promise)."""
    pick = lambda lo, hi: int(torch.randint(lo, hi, ()))  # noqa: E731
    if big:
        return [(pick(256, 4096), 8 * pick(32, 512), 8 * pick(32, 512)) for _ in range(groups)]
    return [(pick(5, 70), 8 * pick(1, 9), 8 * pick(1, 12)) for _ in range(groups)]

def main(groups=None, small=False):
    """Run a random group through both variants; True when every product matches."""
    device = "cuda" if ON_GPU else "cpu"
    big = ON_GPU and not small
    shapes = problem_shapes(groups or (16 if big else 4), big)
    group_a = [torch.randn((m, k), device=device, dtype=torch.float16) for m, n, k in shapes]
    group_b = [torch.randn((k, n), device=device, dtype=torch.float16) for m, n, k in shapes]
    expected = [a.double() @ b.double() for a, b in zip(group_a, group_b)]
    ok = True
    for use_descriptors in (False, True):
        group_c = grouped_gemm(group_a, group_b, use_descriptors)
        err = max((c.double() - e).abs().max().item() for c, e in zip(group_c, expected))
        good = True
        for c, e in zip(group_c, expected):
            try:  # fp16 output: one rounding of values of size ~sqrt(K)
                triton.testing.assert_close(c.double(), e, atol=1e-2, rtol=1e-2)
            except AssertionError:
                good = False
        ok &= good
        print(f"grouped gemm, {len(shapes)} problems {shapes[:3]}{' ...' if len(shapes) > 3 else ''}, "
              f"{'tensor descriptors' if use_descriptors else 'pointer tables'} on {device}: "
              f"max abs error {err:.3g} -> {'OK' if good else 'MISMATCH'}")
    flops = sum(2 * m * n * k for m, n, k in shapes)
    for use_descriptors in (False, True):
        ms = triton.testing.do_bench(lambda: grouped_gemm(group_a, group_b, use_descriptors))
        print(f"time ({'descriptors' if use_descriptors else 'pointer tables'}): {ms:.4f} ms per call, "
              f"{flops / ms / 1e9:.3g} TFLOP/s")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=None, help="number of problems in the group")
    parser.add_argument("--small", action="store_true", help="a small, fast run (on the CPU)")
    args = parser.parse_args()
    sys.exit(0 if main(args.groups, small=args.small) else 1)
