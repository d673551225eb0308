"""Tutorial 02's persistent softmax as its `softmax()` launches it, with what drives its
grid printed beside the time: registers per thread and shared memory (from the compiled
kernel's metadata), the occupancy and program count the tutorial derives from them.

    python benchmarks/softmax_occupancy.py                 # the real Triton
    python -m tegula.compat benchmarks/softmax_occupancy.py  # tegula

One line per N: registers, shared bytes, occupancy, programs, then the kernel's time
launched directly (`us`, `GB/s`), the time of the tutorial's whole `softmax()` call as
its benchmark measures it (`call us`: warmup + `_init_handles` + launch each call), and
the host time of the call's two halves (`warmup us`, `launch us`, no synchronization).
Comparing the two outputs shows whether a gap at small N comes from the kernel, from the
grid it is given or from the host work around each launch.
"""
import time

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float('inf'))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)


def main():
    dev = torch.device("cuda")
    props = triton.runtime.driver.active.utils.get_device_properties(dev.index or 0)
    num_sm, num_regs, smem = props["multiprocessor_count"], props["max_num_regs"], props["max_shared_mem"]
    print(f"{triton.__name__} {triton.__version__} SMs {num_sm} regs {num_regs} smem {smem}")
    for n_cols in (128, 256, 512, 1024, 1536, 2048, 3072, 4096, 8192):
        x = torch.randn(4096, n_cols, device=dev)
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        num_warps, num_stages = 8, 4 if smem > 200000 else 2
        k = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), 4096, n_cols, BLOCK_SIZE=block,
                                  num_stages=num_stages, num_warps=num_warps, grid=(1,))
        k._init_handles()
        occ = num_regs // (k.n_regs * 32 * num_warps)
        if k.metadata.shared:
            occ = min(occ, smem // k.metadata.shared)
        programs = min(num_sm * occ, 4096)

        def run():
            k[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), 4096, n_cols, block, num_stages)

        def warm():
            w = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), 4096, n_cols, BLOCK_SIZE=block,
                                      num_stages=num_stages, num_warps=num_warps, grid=(1,))
            w._init_handles()
            return w

        def call():  # the tutorial's softmax(): warmup, occupancy, launch, every call
            w = warm()
            w[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), 4096, n_cols, block, num_stages)

        run()
        torch.testing.assert_close(y, torch.softmax(x, dim=1))
        ms = triton.testing.do_bench(run)
        call_ms = triton.testing.do_bench(call)
        host = []
        for fn in (warm, run):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(500):
                fn()
            host.append((time.perf_counter() - start) / 500 * 1e6)
            torch.cuda.synchronize()
        print(f"{n_cols:5d} regs {k.n_regs:3d} shared {k.metadata.shared:6d} occ {occ:2d} programs {programs:5d} "
              f"{ms * 1e3:7.1f} us {2 * x.numel() * 4 / ms * 1e-6:6.0f} GB/s  call {call_ms * 1e3:7.1f} us  "
              f"warmup {host[0]:6.1f} us  launch {host[1]:6.1f} us")


if __name__ == "__main__":
    main()
