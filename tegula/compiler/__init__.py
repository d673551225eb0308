"""`tegula.compiler` (Triton's `triton.compiler`): compile without launching.

    compile(ASTSource(fn, signature, constexprs), target=GPUTarget("cuda", 90, 32))

The implementation lives in `tegula.runtime.compiler`; this package is the public name.
"""
from ..backends.compiler import GPUTarget
from ..errors import CompilationError
from ..runtime.compiler import ASTSource, CompiledKernel, IRSource, compile
from ..runtime.kernel import KernelMetadata
from ..runtime.options import CompileOptions

__all__ = ["ASTSource", "CompilationError", "CompileOptions", "CompiledKernel", "GPUTarget", "IRSource",
           "KernelMetadata", "compile"]
