"""Runs the CUDA backend's lowering on the host CPU, for testing without a GPU.

The kernel is lowered by the very same code as for the GPU (layouts, conversions,
reductions, scans, dots, control flow, checked mode, the NVPTX scalar target's choice
of instructions), for compute capability 80, 89 or 90, with `HostDevice` standing in for
the hardware pieces of `nvvm.NVPTXDevice`. The module is JIT-compiled with LLVM for
the host, and each CTA runs as 32 × num_warps OS threads (ctypes releases the GIL), so
barriers and collectives wait for real threads as on the GPU.

The package:
- `kernel`: `EmulatedKernel(kernel, num_warps, debug, capability)` and `run`;
  `lower_for_host` is the one call of the lowering;
- `cta`: the CTA context block, the barriers (per CTA, per warp, per warpgroup), the
  exchange buffer, and the threads (`CtaRunner`);
- `host_device`: `HostDevice`, ids and CTA services (scoped barriers, the exchange
  buffer, shared memory, printf);
- `warp_models`: `ldmatrix` and `mma.sync` from their PTX definitions;
- `ptx_models`: predicated/cached/volatile global loads and stores, the SFU
  approximations, fp8 and round-toward-zero conversions, libdevice calls.

How host models plug in (the seam the tensor-core and async instructions use):
1. The lowering reaches the hardware only through `NVPTXDevice` methods; every one that
   emits an instruction is named in `NVPTXDevice.INSTRUCTIONS`. A new instruction
   (`cp_async`, `mbarrier_*`, `stmatrix`, `wgmma`, `tma_load`, ...) is a new method
   there that emits its PTX, plus its name in that tuple.
2. Its host model is a method of the same name and signature on a mixin in a module of
   this package (`warp_models` for warp collectives, `wgmma_models`, `tma_models` for
   the bulk tensor copies and mbarriers), added to `HostDevice`'s bases. A model emits
   plain LLVM IR from the CTA services: `sync(b, scope)` for scope "cta", "warp" or
   "warpgroup"; `publish` / `peek` / `collective(b, scope, words, read)` to see other
   threads' registers; `smem`, `lane`, `warp`, `warp_base`. The natural models: a
   warpgroup collective for wgmma (B, and A when it is in shared memory, read through
   the descriptor), copies that complete at issue for cp.async and TMA (so commit and
   wait only order), an mbarrier as a word in shared memory updated with atomics.
   Where a model computes from the same LinearLayouts as the lowering, it checks them
   instead: the models state each instruction from its PTX ISA definition.
3. Until then, `HostDevice`'s method raises `HostModelMissing` naming the instruction
   at lowering time; `tests/backends/cuda/test_emulator.py` lists the instructions
   without a model.

`device_print` goes through the host's `printf` (stdout is flushed after each launch),
so its format is tested too. Scalar arguments of 16-bit float types reach the kernel
through a small wrapper taking their bit patterns (ctypes has no half type).

What this does not cover: the approximate instructions' own errors (`ex2.approx`,
`sqrt.approx`, `rsqrt.approx`, `div.full` compute correctly rounded here, with the
flush-to-zero of denormal inputs modelled), the inline PTX of atomics (the host runs
`lower_atomic`'s LLVM atomics), libdevice (math is the host C library's, and a function
it lacks does not run), and timing. Those are checked by ptxas and on the GPU (the
numerical suite's "cuda" backend, `benchmarks/gpu_smoke.py`).
"""
from .host_device import HostDevice, HostModelMissing
from .kernel import CAPABILITIES, EmulatedKernel, lower_for_host, run

__all__ = ["CAPABILITIES", "EmulatedKernel", "HostDevice", "HostModelMissing", "lower_for_host", "run"]
