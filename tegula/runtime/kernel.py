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

Triton's launch protocol is there too (PyTorch's Inductor drives kernels through it):
`_init_handles()` loads the kernel and sets `function` (the loaded launcher) and
`module` (what keeps it loaded); `run(gridX, gridY, gridZ, stream, function,
packed_metadata, launch_metadata, launch_enter_hook, launch_exit_hook, *params)` calls
the enter hook with `launch_metadata`, launches `function` on `stream` (the CUDA
launcher uses it; host backends have no streams) and calls the exit hook;
`launch_metadata(grid, stream, *params)` is None unless a `knobs.runtime`
launch-enter hook is set. A kernel rebuilt from its `__dict__` with `run`, `function`
and `module` set to None (as Inductor sends compiled kernels between processes) is
reloaded by `_init_handles()`; pickling a CompiledKernel drops the loaded state the
same way. `run(grid, *args)` with a tuple (or callable) grid is tegula's short form.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Optional, Sequence

from ..errors import KernelArgumentError
from ..knobs import runtime as _runtime_knobs
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

    def launch_values(grid: tuple, values: Sequence[Any], *pointers: Any, stream: Any = None) -> None:
        launch(grid, values)

    launch_values.backend_launch = launch
    return launch_values


def _without_stream(launch: Callable[..., None]) -> Callable[..., None]:
    """A pointer-taking launcher of a backend without streams, accepting `stream=`."""

    def launch_pointers(grid: tuple, values: Sequence[Any], *pointers: Any, stream: Any = None) -> None:
        launch(grid, values, *pointers)

    launch_pointers.backend_launch = launch
    return launch_pointers


class LazyDict:
    """Launch metadata handed to launch hooks (Triton's `LazyDict`): `get()` evaluates
    the functions `add`ed to it once and returns the dict."""

    def __init__(self, data: dict) -> None:
        self.data = data
        self.extras: list = []

    def get(self) -> dict:
        while self.extras:
            func, args = self.extras.pop(0)
            self.data.update(func(*args))
        return self.data

    def add(self, func: Callable[..., dict], args: tuple) -> None:
        self.extras.append((func, args))


def current_stream(kernel: "CompiledKernel") -> Any:
    """The stream a launch of `kernel` goes to when none is given (0 on the host)."""
    if getattr(kernel.backend, "name", "") != "cuda":
        return 0
    from .driver import driver

    device = kernel.device
    return driver.active.get_current_stream(device if device is not None and device >= 0 else None)


def _flattening(launch: Callable[..., None], flatten: Callable[[Sequence[Any]], list]) -> Callable[..., None]:
    """The launcher of a kernel with tuple or descriptor parameters: the values of the
    kernel's parameters become the values of its leaves (see `arg_trees`)."""
    takes_stream = getattr(launch, "accepts_stream", False)

    def launch_leaves(grid: tuple, values: Sequence[Any], *pointers: Any, stream: Any = None) -> None:
        if takes_stream:
            launch(grid, flatten(values), stream=stream)
        else:
            launch(grid, flatten(values))

    launch_leaves.backend_launch = launch
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
        self.module: Any = None
        self.function: Any = None
        self.metadata_group: dict[str, str] = {}

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

    # ------------------------------------------------------------------ loading
    def _init_handles(self) -> None:
        """Load the kernel on its device (once; again after `function` was cleared)."""
        if self.__dict__.get("function") is not None and "_launch" in self.__dict__:
            return
        if self.backend is None:
            raise KernelArgumentError(f"kernel '{self.name}' has no backend to run it")
        if _runtime_knobs.kernel_load_start_hook:
            _runtime_knobs.kernel_load_start_hook(None, None, self.name, self.metadata_group, self.hash)
        launch = self.backend.load(self, self.device)
        trees = getattr(self.src, "arg_trees", None)
        if trees:
            launch = _flattening(launch, flattener(self.src.fn.arg_names, trees))
        elif not getattr(launch, "accepts_pointers", False):
            launch = _without_pointers(launch)
        elif not getattr(launch, "accepts_stream", False):
            launch = _without_stream(launch)
        self.module = getattr(launch, "_tegula_module", None) or self.backend
        self.function = launch
        if self.__dict__.get("run", False) is None:
            del self.__dict__["run"]  # a rebuilt kernel: the class's run again
        self._launch = launch
        if _runtime_knobs.kernel_load_end_hook:
            _runtime_knobs.kernel_load_end_hook(self.module, self.function, self.name, self.metadata_group, self.hash)

    def _launch(self, grid: tuple, values: Sequence[Any], *pointers: Any, stream: Any = None) -> None:
        # Replaced by the backend's launcher on the first call (see the module docstring).
        self._init_handles()
        self.__dict__["_launch"](grid, values, *pointers, stream=stream)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_launch", None)
        state.pop("_last_grid_runner", None)
        state.update(module=None, function=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # ------------------------------------------------------------------ launching
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

    def launch_metadata(self, grid: tuple, stream: Any, *args: Any) -> Optional[LazyDict]:
        """What launch hooks receive: None when no launch-enter hook is set, else the
        kernel's name, function and stream plus what its `launch_metadata=` function
        (given to `@jit`) computes from `(grid, metadata, {param: value})`."""
        if not _runtime_knobs.launch_enter_hook:
            return None
        self._init_handles()
        ret = LazyDict({"name": self.name, "function": self.function, "stream": stream})
        fn = getattr(self.src, "fn", None)
        user = getattr(fn, "launch_metadata", None) if fn is not None else None
        if user is None:
            return ret
        values = self._full_values(args)
        ret.add(user, (grid, self.metadata, dict(zip(self._value_names(), values))))
        return ret

    def _value_names(self) -> Sequence[str]:
        """The names of the values `run` takes (the kernel's parameters; tuple and
        descriptor parameters whole, not their leaves)."""
        if getattr(self.src, "arg_trees", None):
            return self.src.fn.arg_names
        return self.metadata.param_names

    def run(self, *args: Any) -> None:
        """Triton's protocol, `run(gridX, gridY, gridZ, stream, function, packed_metadata,
        launch_metadata, launch_enter_hook, launch_exit_hook, *params)`, or tegula's
        `run(grid, *args)` when the first argument is a grid tuple or callable."""
        if not args:
            raise KernelArgumentError(f"compiled kernel '{self.name}': run() needs a grid")
        if isinstance(args[0], (tuple, list)) or callable(args[0]):
            grid, params = args[0], args[1:]
            values = self._full_values(params)
            names = self._value_names()
            g = normalize_grid(grid, lambda: dict(zip(names, values)), self.name)
            self._launch_hooked(g, values, None)
            return
        if len(args) < 9:
            raise KernelArgumentError(
                f"compiled kernel '{self.name}': run(gridX, gridY, gridZ, stream, function, packed_metadata, "
                f"launch_metadata, launch_enter_hook, launch_exit_hook, *params) got {len(args)} arguments")
        gx, gy, gz, stream, function, _packed, launch_md, enter, exit_, *params = args
        if function is None:
            self._init_handles()
            function = self.function
        values = self._full_values(params)
        if enter:
            enter(launch_md)
        function((gx, gy, gz), values, stream=stream)
        if exit_:
            exit_(launch_md)

    def _launch_hooked(self, grid: tuple, values: Sequence[Any], stream: Any, *pointers: Any) -> None:
        """A launch with the `knobs.runtime` launch hooks around it (when any is set)."""
        if not _runtime_knobs.launch_hooked:
            self._launch(grid, values, *pointers, stream=stream)
            return
        if stream is None:  # the hooks are told which stream the launch goes to
            stream = current_stream(self)
        md = self.launch_metadata(grid, stream, *values)
        enter, exit_ = _runtime_knobs.launch_enter_hook, _runtime_knobs.launch_exit_hook
        if enter:
            enter(md)
        self._launch(grid, values, *pointers, stream=stream)
        if exit_:
            exit_(md)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        # Code such as Triton's tutorial 02 writes `kernel[(n, 1, 1)](...)` on every call:
        # the launcher of the latest 3-tuple grid is reused, such a grid is taken as it
        # is, and the hooks are one attribute read
        fixed = grid if grid.__class__ is tuple and len(grid) == 3 else None
        last = self.__dict__.get("_last_grid_runner")
        if fixed is not None and last is not None and last[0] == fixed:
            return last[1]
        def runner(*args: Any, stream: Any = None) -> None:
            values = self._full_values(args)
            if fixed is not None:
                g = fixed
            else:
                names = self.metadata.param_names
                g = normalize_grid(grid, lambda: dict(zip(names, values)), self.name)
            # stream None: the backend's launcher reads the current stream itself, through
            # the framework's raw getter, as the JIT launch path does (asking
            # torch.cuda.current_stream() here built a Stream object on every launch)
            if _runtime_knobs.launch_hooked:
                self._launch_hooked(g, values, stream)
            else:
                self._launch(g, values, stream=stream)

        if fixed is not None:
            self.__dict__["_last_grid_runner"] = (fixed, runner)
        return runner


    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} for {self.metadata.target} ({self.hash[:12]})>"
