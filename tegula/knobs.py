"""`triton.knobs`: Triton 3.6's knobs module, over tegula's own knobs (`tegula.config`).

    from tegula import knobs          # or, under tegula.compat, `from triton import knobs`
    knobs.cache.dir                   # the compilation cache directory
    knobs.runtime.launch_enter_hook.add(fn)   # or `= fn`: fn(launch_metadata) before each launch

Groups, as in Triton: `cache` (`dir`, `dump_dir`, `override_dir`), `compilation`
(`always_compile`, `front_end_debugging`, `checked` — tegula's checked mode), `autotuning`
(`cache`, `print`), `runtime` (`interpret`, `debug`, `override_arch`, the launch / load /
JIT hooks), `language` (`fp32_default`, `default_fp_fusion`) and `nvidia` (`libdevice_path`, `ptxas_path`).
A knob that exists in `tegula.config` reads it (so `TRITON_*` and `TEGULA_*` variables
keep working) and assigning one sets the variable tegula reads, as Triton's knobs do;
deleting the assignment (`del knobs.cache.dir` or `reset()`) goes back to the
environment.

Hooks (`runtime`): `launch_enter_hook` / `launch_exit_hook` are called with the launch
metadata (`CompiledKernel.launch_metadata`: name, function, stream, and what the
kernel's `launch_metadata=` function adds) around every launch, from the JIT path and
from `CompiledKernel.run`; `kernel_load_start_hook` / `kernel_load_end_hook` around a
kernel's loading (`_init_handles`); `jit_cache_hook` before and `jit_post_compile_hook`
after a JIT launch compiles (a `jit_cache_hook` returning False skips the compile, as in
Triton). Each launch/load hook is a `HookChain` (empty and false by default): assigning
a function makes it the only entry, `None` empties it. When no launch hook is set the
launch path pays one attribute read (`runtime.launch_hooked`).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Generator, Optional

from .config import KNOBS


class HookChain:
    """Hooks of one kind, called in order (reversed for exit hooks); false when empty."""

    def __init__(self, reversed: bool = False, on_change: Optional[Callable[[], None]] = None) -> None:
        self.calls: list[Callable[..., Any]] = []
        self.reversed = reversed
        self._on_change = on_change

    def add(self, func: Callable[..., Any]) -> None:
        if func not in self.calls:
            self.calls.append(func)
            self._changed()

    def remove(self, func: Callable[..., Any]) -> None:
        if func in self.calls:
            self.calls.remove(func)
            self._changed()

    def clear(self) -> None:
        self.calls.clear()
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        for call in (reversed(self.calls) if self.reversed else list(self.calls)):
            call(*args, **kwargs)

    def __bool__(self) -> bool:
        return bool(self.calls)

    def __len__(self) -> int:
        return len(self.calls)

    def __repr__(self) -> str:
        return f"HookChain({self.calls!r})"


class env_knob:
    """A knob of `tegula.config` seen as a Triton knob (a data descriptor)."""

    def __init__(self, attr: str, to_env: Callable[[Any], str] = str, unset_is_none: bool = False) -> None:
        self.attr = attr
        self.to_env = to_env
        # Triton's optional-path knobs read None when unset (tegula's read "")
        self.unset_is_none = unset_is_none

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        if self.name in obj.__dict__:
            return obj.__dict__[self.name]
        value = KNOBS[self.attr].read()
        return None if self.unset_is_none and value == "" else value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value
        var = KNOBS[self.attr].name
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = ("1" if value else "0") if isinstance(value, bool) else self.to_env(value)

    def __delete__(self, obj: Any) -> None:
        if obj.__dict__.pop(self.name, None) is not None:
            os.environ.pop(KNOBS[self.attr].name, None)


class base_knobs:
    """Triton's knob-group base: `knobs`, `copy()`, `reset()`, `scope()`."""

    @property
    def knob_descriptors(self) -> dict[str, env_knob]:
        return {k: v for k, v in type(self).__dict__.items() if isinstance(v, env_knob)}

    @property
    def knobs(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.knob_descriptors}

    def copy(self) -> "base_knobs":
        res = type(self)()
        res.__dict__.update(self.__dict__)
        return res

    def reset(self) -> "base_knobs":
        for k in self.knob_descriptors:
            delattr(self, k)
        return self

    @contextmanager
    def scope(self) -> Generator[None, None, None]:
        variables = [KNOBS[d.attr].name for d in self.knob_descriptors.values()]
        saved_env = {v: os.environ.get(v) for v in variables}
        saved = dict(self.__dict__)
        try:
            yield
        finally:
            self.__dict__.clear()
            self.__dict__.update(saved)
            for v, val in saved_env.items():
                if val is None:
                    os.environ.pop(v, None)
                else:
                    os.environ[v] = val


class cache_knobs(base_knobs):
    dir = env_knob("cache_dir")
    dump_dir = env_knob("dump_dir")
    override_dir = env_knob("override_dir")
    home_dir: str = os.path.expanduser("~/")
    manager_class = None
    remote_manager_class = None


class compilation_knobs(base_knobs):
    always_compile = env_knob("always_compile")
    front_end_debugging = env_knob("debug_frontend")
    # tegula's checked mode: bounds-checked loads and stores on compiled backends
    checked = env_knob("checked")


class autotuning_knobs(base_knobs):
    cache = env_knob("cache_autotuning")
    print = env_knob("print_autotuning")


class runtime_knobs(base_knobs):
    interpret = env_knob("interpret")
    debug = env_knob("debug")
    # TRITON_OVERRIDE_ARCH: compile CUDA kernels for this arch ("sm80") instead of the device's
    override_arch = env_knob("override_arch", unset_is_none=True)

    def __init__(self) -> None:
        self.launch_hooked = False
        self.__dict__["launch_enter_hook"] = HookChain(on_change=self._hooks_changed)
        self.__dict__["launch_exit_hook"] = HookChain(reversed=True, on_change=self._hooks_changed)
        self.__dict__["kernel_load_start_hook"] = HookChain()
        self.__dict__["kernel_load_end_hook"] = HookChain(reversed=True)
        self.jit_cache_hook: Optional[Callable[..., Any]] = None
        self.jit_post_compile_hook: Optional[Callable[..., Any]] = None

    _CHAINS = ("launch_enter_hook", "launch_exit_hook", "kernel_load_start_hook", "kernel_load_end_hook")

    def _hooks_changed(self) -> None:
        self.__dict__["launch_hooked"] = bool(self.__dict__["launch_enter_hook"]) or \
            bool(self.__dict__["launch_exit_hook"])

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._CHAINS and name in self.__dict__:
            chain = self.__dict__[name]
            if isinstance(value, HookChain):
                if value._on_change is None and name.startswith("launch"):
                    value._on_change = self._hooks_changed
                self.__dict__[name] = value
                self._hooks_changed()
                return
            chain.calls[:] = [] if value is None else [value]
            chain._changed()
            return
        super().__setattr__(name, value)


class nvidia_knobs(base_knobs):
    libdevice_path = env_knob("libdevice", unset_is_none=True)
    ptxas_path = env_knob("ptxas", unset_is_none=True)


class language_knobs(base_knobs):
    # TRITON_F32_DEFAULT: the input precision of f32 dots that name none (None: tf32,
    # or ieee under allow_tf32=False)
    fp32_default = env_knob("f32_default", unset_is_none=True)
    # TRITON_DEFAULT_FP_FUSION: the default of the enable_fp_fusion launch option
    default_fp_fusion = env_knob("default_fp_fusion")


cache = cache_knobs()
compilation = compilation_knobs()
autotuning = autotuning_knobs()
runtime = runtime_knobs()
nvidia = nvidia_knobs()
language = language_knobs()

__all__ = ["HookChain", "autotuning", "base_knobs", "cache", "compilation", "language", "nvidia", "runtime"]
