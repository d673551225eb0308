"""The compiled CPU backend: tile IR → loop nests → LLVM IR (`lower`), JIT-compiled for
the host CPU and run over the grid on a thread pool (`backend`)."""
from .backend import CpuBackend, make_backend

__all__ = ["CpuBackend", "make_backend"]
