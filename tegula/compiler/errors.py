"""`tegula.compiler.errors` (Triton's `triton.compiler.errors`)."""
from ..errors import CompilationError

__all__ = ["CompilationError"]
