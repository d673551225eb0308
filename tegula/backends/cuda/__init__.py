"""The CUDA backend: tile IR → layouts → LLVM IR (NVPTX) → PTX → cubin, and the launch
path through cuda-bindings (DESIGN.md §6).

- `compile_kernel(kernel, options, target) -> (asm, metadata)` (no GPU needed);
- `tegula.backends.cuda.driver`: modules, functions and the launcher (needs a GPU).
"""
from .backend import CudaBackend, make_backend
from .compiler import compile_kernel

__all__ = ["CudaBackend", "compile_kernel", "make_backend"]
