"""`tegula.compiler.compiler` (Triton's `triton.compiler.compiler`): the same names as
`tegula.compiler`, for scripts that import them from here."""
from ..runtime.compiler import ASTSource, CompiledKernel, IRSource, compile
from ..runtime.kernel import KernelMetadata

__all__ = ["ASTSource", "CompiledKernel", "IRSource", "KernelMetadata", "compile"]
