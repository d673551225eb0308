"""`GPUTarget`: what a kernel is compiled for (Triton's `triton.backends.compiler.GPUTarget`).

`backend` names the backend that compiles for it (`"cuda"`, `"cpu"`, `"interpreter"`),
`arch` its architecture (an int compute capability such as 90 for CUDA, a string
elsewhere) and `warp_size` the number of lanes that execute a warp (32 on NVIDIA GPUs,
1 on the host). It is part of every compilation cache key.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class GPUTarget:
    backend: str
    arch: Union[int, str]
    warp_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not self.backend:
            raise ValueError(f"GPUTarget.backend must be a backend name, got {self.backend!r}")
        if not isinstance(self.warp_size, int) or self.warp_size <= 0:
            raise ValueError(f"GPUTarget.warp_size must be a positive int, got {self.warp_size!r}")
