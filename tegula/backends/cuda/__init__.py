"""The CUDA backend: tile IR → layouts → LLVM IR (NVPTX) → PTX → cubin, and the launch
path through cuda-bindings (docs/design.md §6).

Entry points:
- `compile_kernel(kernel, options, target, emit=None) -> (asm, metadata)`: no GPU needed;
  `asm` has `tgir` (the GPU stage: parseable IR whose tile types carry encodings), `llir` (optimized LLVM IR), `ptx`
  and, when ptxas exists, `cubin`; `metadata` has `name`, `num_warps`, `shared` (dynamic
  shared memory bytes), `n_regs`, `n_spills`, `arg_types`, checked-mode sites, ...
- `make_backend()` / `CudaBackend`: the runtime's backend protocol (`available`,
  `compile_available`, `current_target`, `compile`, `load`);
- `driver` (contexts, modules, shared-memory opt-in) and `launcher.make_launcher`.

The stages, one module each:
- `linear_layout` (GF(2) algebra), `layouts` (blocked/slice/view layouts),
  `encodings` (the `#blocked/#mma/#dot_op/#slice/#linear` tile encodings of `tgir`),
  `pipeline_loops` (software pipelining), `assign_layouts` (choosing layouts) and
  `encode_layouts` (writing them into the types, explicit `convert_layout`s; the
  lowering's view of a `tgir` kernel), `shared_memory` (buffer and scratch placement,
  barriers), run as the pass pipeline `cuda_tgir`;
- `lower_kernel` (the lowering context) and one `lower_*` module per op family, all
  registered in `registry`; `convert` (layout conversions: local renaming,
  rematerialisation of index math, or shared memory), `checked` (debug mode),
  `nvvm` (the hardware building blocks), `nvptx_target` (libdevice and PTX math);
- `codegen` (LLVM O3 → PTX, libdevice linking), `ptxas` (cubin, resource report),
  `compiler` (the stage driver), `backend`, `driver`, `launcher`;
- `emulator`: runs the very same lowering on the host CPU (one OS thread per GPU thread)
  so the layouts, conversions, reductions, scans and dots are tested without a GPU.

Shared memory is one dynamic buffer. The pass `shared_memory.allocate_shared_memory`
places the buffers of pipelined loops (a stack, by liveness) and each op's scratch
(conversions, cross-warp reductions and scans, staged dot operands: live for one op,
after the live buffers); `shared_memory.insert_barriers` puts `barrier` ops between
ops where a write could overtake another thread's access; an op's own write-barrier-
read stays in its lowering.

Numerics against the interpreter (docs/numerics.md has the bounds, which the numerical
suite in tests/numerics checks on the GPU and on the emulator): integer ops are bitwise
equal (division by zero, shifts past the width and float → int saturation follow
`ir.numpy_ops`); float arithmetic, fma and conversions are correctly rounded; math
functions, `sqrt` (`sqrt.approx`) and `fdiv` (`div.full.f32`) are within a few ulp;
reductions and dots sum in a different order than numpy. Rounding to fp8 saturates to
the largest finite value, infinities included (PTX `cvt.rn.satfinite`, as Triton 3.6
emits on sm_90; in software on sm_80), and so does the interpreter.
"""
from .backend import CudaBackend, make_backend
from .compiler import compile_kernel

__all__ = ["CudaBackend", "compile_kernel", "make_backend"]
