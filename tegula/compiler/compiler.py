"""`tegula.compiler.compiler` (Triton's `triton.compiler.compiler`): the same names as
`tegula.compiler`, for scripts that import them from here, and `make_backend(target)`,
the `triton.backends` compiler backend (`BaseBackend`) serving a target."""
from typing import Any

from ..backends.compiler import GPUTarget
from ..runtime.cache_manager import triton_key
from ..runtime.compiler import ASTSource, CompiledKernel, IRSource, compile
from ..runtime.kernel import KernelMetadata


def make_backend(target: GPUTarget) -> Any:
    """The compiler backend of `triton.backends.backends` that supports `target`
    (exactly one must), instantiated for it: `.hash()`, `.parse_options(dict)`."""
    from ..compat_surface.backends import backends

    actives = [b.compiler for b in backends.values() if b.compiler.supports_target(target)]
    if len(actives) != 1:
        raise RuntimeError(f"{len(actives)} compatible backends for target {target.backend} ({actives})")
    return actives[0](target)


__all__ = ["ASTSource", "CompiledKernel", "GPUTarget", "IRSource", "KernelMetadata", "compile", "make_backend",
           "triton_key"]
