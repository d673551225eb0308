"""`CompiledKernel`: one compiled specialization of a kernel, and how it is launched.

It carries the text of every stage (`asm["tir"]`, `asm["tir_opt"]`, then the backend's,
e.g. `asm["ptx"]`, `asm["cubin"]`), its `metadata` (`num_warps`, `num_stages`,
`num_ctas`, `shared`, `name`, `target`, `debug`, `hash`, `written_args`, ... and what
the backend adds, such as `n_regs`) and, for the interpreter, the optimized IR (`ir`).

The backend loads it lazily, on the first launch: `_launch` starts as a method that
asks the backend for a launcher and then replaces itself with that launcher, so every
later launch is a single call. It is called as `_launch(grid, values, *pointers)`: the
JIT launch path hands over, as trailing positional arguments (no tuple per launch), the
device addresses it already read from torch tensors (`pointers[i]` for `values[i]`,
None elsewhere; none at all from `run`). A backend's launcher that can use them says so
with `accepts_pointers = True`; any other launcher is called as `launch(grid, values)`
through a thin adapter.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Optional, Sequence

from ..errors import KernelArgumentError
from .arg_trees import flattener


class KernelMetadata(SimpleNamespace):
    """Attribute access to a compiled kernel's metadata (Triton's `KernelMetadata`)."""

    def _asdict(self) -> dict[str, Any]:
        return dict(vars(self))

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)


def normalize_grid(grid: Any, bound: Callable[[], dict], kernel: str) -> tuple:
    """A launch grid as a 3-tuple: `grid` is a tuple/list of 1-3 sizes or a callable of
    the bound arguments (`bound()` builds that dict only when needed)."""
    if callable(grid):
        grid = grid(bound())
    try:
        if isinstance(grid, (str, bytes, dict)):
            raise TypeError
        n = len(grid)
    except TypeError:
        if hasattr(grid, "__index__"):  # a bare int, which Triton rejects; be kind
            return (grid, 1, 1)
        raise KernelArgumentError(
            f"grid of kernel '{kernel}' must be a tuple of 1 to 3 sizes or a callable returning one, "
            f"got {type(grid).__name__}") from None
    if n == 3:
        return tuple(grid)
    if n == 1:
        return (grid[0], 1, 1)
    if n == 2:
        return (grid[0], grid[1], 1)
    raise KernelArgumentError(f"grid of kernel '{kernel}' must have 1 to 3 dimensions, got {n}: {grid!r}")


def _without_pointers(launch: Callable[[tuple, Sequence[Any]], None]) -> Callable[..., None]:
    """A `launch(grid, values)` of a backend that takes no pointers, in the three-argument form."""

    def launch_values(grid: tuple, values: Sequence[Any], *pointers: Any) -> None:
        launch(grid, values)

    launch_values.backend_launch = launch
    return launch_values


def _flattening(launch: Callable[..., None], flatten: Callable[[Sequence[Any]], list]) -> Callable[..., None]:
    """The launcher of a kernel with tuple or descriptor parameters: the values of the
    kernel's parameters become the values of its leaves (see `arg_trees`)."""

    def launch_leaves(grid: tuple, values: Sequence[Any], *pointers: Any) -> None:
        launch(grid, flatten(values))

    return launch_leaves


class CompiledKernel:
    """See the module docstring. Launch directly with `compiled[grid](*args)` or
    `compiled.run(grid, *args)`, where `args` are either all the kernel's parameters
    (as a JIT launch binds them) or only its runtime (non-constexpr) arguments."""

    def __init__(self, src: Any, asm: dict[str, Any], metadata: KernelMetadata, *,
                 ir: Any = None, backend: Any = None, device: Optional[int] = None):
        self.src = src
        self.asm = asm
        self.metadata = metadata
        self.name: str = metadata.name
        self.hash: str = metadata.hash
        self.ir = ir
        self.backend = backend
        self.device = device

    # ------------------------------------------------------------------ Triton's attributes
    @property
    def kernel(self) -> Any:
        """The loadable binary (e.g. the cubin), when the backend produces one."""
        stage = getattr(self.backend, "binary_stage", None)
        return self.asm.get(stage) if stage else None

    @property
    def n_regs(self) -> Optional[int]:
        return getattr(self.metadata, "n_regs", None)

    @property
    def n_spills(self) -> Optional[int]:
        return getattr(self.metadata, "n_spills", None)

    @property
    def packed_metadata(self) -> KernelMetadata:
        return self.metadata

    # ------------------------------------------------------------------ launching
    def _init_handles(self) -> None:
        """Load the kernel on its device (once)."""
        if "_launch" not in self.__dict__:
            if self.backend is None:
                raise KernelArgumentError(f"kernel '{self.name}' has no backend to run it")
            launch = self.backend.load(self, self.device)
            trees = getattr(self.src, "arg_trees", None)
            if trees:
                launch = _flattening(launch, flattener(self.src.fn.arg_names, trees))
            elif not getattr(launch, "accepts_pointers", False):
                launch = _without_pointers(launch)
            self._launch = launch

    def _launch(self, grid: tuple, values: Sequence[Any], *pointers: Any) -> None:
        # Replaced by the backend's launcher on the first call (see the module docstring).
        self._init_handles()
        self.__dict__["_launch"](grid, values, *pointers)

    def _full_values(self, args: Sequence[Any]) -> Sequence[Any]:
        md = self.metadata
        if getattr(self.src, "arg_trees", None):
            names = self.src.fn.arg_names
            if len(args) != len(names):
                raise KernelArgumentError(f"compiled kernel '{self.name}' takes all {len(names)} parameters "
                                          f"({', '.join(names)}); got {len(args)}")
            return args
        if len(args) == len(md.param_names):
            return args
        if len(args) == len(md.arg_indices):
            full: list[Any] = [None] * len(md.param_names)
            for i, v in zip(md.arg_indices, args):
                full[i] = v
            return full
        raise KernelArgumentError(
            f"compiled kernel '{self.name}' takes its {len(md.arg_indices)} runtime arguments "
            f"({', '.join(md.arg_names)}) or all {len(md.param_names)} parameters "
            f"({', '.join(md.param_names)}); got {len(args)}")

    def run(self, grid: Any, *args: Any) -> None:
        values = self._full_values(args)
        names = self.src.fn.arg_names if getattr(self.src, "arg_trees", None) else self.metadata.param_names
        g = normalize_grid(grid, lambda: dict(zip(names, values)), self.name)
        self._launch(g, values)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def runner(*args: Any, stream: Any = None) -> None:
            self.run(grid, *args)

        return runner

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} for {self.metadata.target} ({self.hash[:12]})>"
