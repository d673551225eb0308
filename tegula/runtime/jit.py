"""`@jit` and `JITFunction`: a Python function that is compiled per specialization and
launched over a grid (`kernel[grid](*args, num_warps=..., **meta)`), as in Triton 3.6.

A JITFunction keeps its in-memory cache of compiled kernels, keyed by the specs of the
arguments (see `specialization`), the knobs that change code generation and the launch
options; devices are part of the specs, so the cache is per device. The launch path is
a function generated once per JITFunction (`binder.build_runner`); this module holds
what happens around it: the first-launch set-up, the cache miss (compile and store),
and the error messages for launches that do not fit the kernel's parameters.
"""
from __future__ import annotations

import difflib
import inspect
import re
import sys
import textwrap
import threading
import warnings
from functools import partial
from typing import Any, Callable, Iterable, NamedTuple, Optional, Union

from ..config import LAUNCH_KNOBS
from ..errors import CompilationError, KernelArgumentError, TegulaError
from ..frontend import exec_sources  # noqa: F401  (its audit hook must see exec'd kernels from the start)
from ..language.constexpr_function import ConstexprFunction, constexpr_function  # noqa: F401
from . import kernel_interface as _ki
from . import specialization as S
from .args import MockTensor
from .binder import build_runner, compute_specs
from .errors import InterpreterCompilationError, InterpreterError
from .kernel_interface import KernelInterface
from .options import CompileOptions
from .tracebacks import public_entry
from .triton_specialization import create_specialize_impl, mangle_type, specialize_impl  # noqa: F401

_MODULES = sys.modules
_TL_PREFIXES = ("tl.", "triton.language.", "tegula.language.", "language.", "core.")
# Annotation spellings that fix a parameter's type (tl dtype names and Triton's short
# names). Python's own `int`/`float`/`bool` annotations are ignored, as in Triton.
_ANNOTATION_TYPES = {
    n: S._DTYPE_NAMES[n] for n in (
        "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
        "fp16", "bf16", "fp32", "fp64", "float16", "bfloat16", "float32", "float64",
        "fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16")
}
_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword-only",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


def _annotation_text(a: Any) -> str:
    if a is inspect.Parameter.empty or a is None:
        return ""
    if isinstance(a, str):
        # Under `from __future__ import annotations` a quoted annotation keeps its quotes.
        return a.strip().strip("'\"").strip()
    if isinstance(a, type):
        return a.__name__
    name = getattr(a, "name", None)  # a tl dtype
    return name if isinstance(name, str) else str(a)


def _annotation_type(text: str) -> str:
    """The signature type an annotation fixes (`i64`, `*fp16`), or "" for none."""
    for prefix in _TL_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
    if text.startswith("*"):
        const = text.startswith("*k") and text[2:3] != "*" and _annotation_type(text[2:])
        prefix, inner = ("*k", const) if const else ("*", _annotation_type(text[1:]))
        return prefix + inner if inner and not inner.startswith("*") else ""
    return _ANNOTATION_TYPES.get(text, "")


class KernelParam:
    """One parameter of a @jit function (Triton's `KernelParam`)."""

    def __init__(self, num: int, param: inspect.Parameter, do_not_specialize: bool,
                 do_not_specialize_on_alignment: bool):
        self.num = num
        self.name = param.name
        self.kind = _KINDS[param.kind]
        self.default = param.default
        self.annotation = _annotation_text(param.annotation)
        self.is_constexpr = "constexpr" in self.annotation
        self.annotation_type = "" if self.is_constexpr else _annotation_type(self.annotation)
        self.do_not_specialize = do_not_specialize
        self.do_not_specialize_on_alignment = do_not_specialize_on_alignment
        # `p: tl.const` (or a `*k...` type): a pointer to read-only memory, whose
        # signature type is `*k<dtype>` (Triton's rule: "const" in the annotation)
        self.is_const = not self.is_constexpr and ("const" in self.annotation or self.annotation_type.startswith("*k"))

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty

    def describe(self) -> str:
        text = self.name + (": constexpr" if self.is_constexpr else "")
        return text + (f" = {self.default!r}" if self.has_default else "")

    def __repr__(self) -> str:
        return f"KernelParam({self.describe()})"


def _index_set(values: Optional[Iterable[Union[int, str]]], names: list[str], what: str, fn_name: str) -> set[str]:
    out = set()
    for v in values or ():
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(names):
            out.add(names[v])
        elif isinstance(v, str) and v in names:
            out.add(v)
        else:
            # Triton ignores such entries (a membership test), and libraries ship them
            # (FlagGems' placeholder kernels): a warning, not an error.
            warnings.warn(f"{what} of kernel '{fn_name}' names no parameter {v!r} (parameters: "
                          f"{', '.join(names) or 'none'}); it is ignored", stacklevel=4)
    return out


class JitFunctionInfo(NamedTuple):
    """What JIT hooks get as `fn` (Triton's `JitFunctionInfo`)."""
    module: str
    name: str
    jit_function: Any


class _SkippedLaunch:
    """What a launch runs when a `jit_cache_hook` declined the compile: nothing."""

    def _launch(self, *args: Any, **kwargs: Any) -> None:
        pass

    _launch_hooked = _launch


_SKIPPED = _SkippedLaunch()


class JITFunction(KernelInterface):
    """See the module docstring. `fn` is the Python function."""

    _tegula_jit = True

    def __init__(self, fn: Callable, version: Any = None,
                 do_not_specialize: Optional[Iterable[Union[int, str]]] = None,
                 do_not_specialize_on_alignment: Optional[Iterable[Union[int, str]]] = None,
                 debug: Optional[bool] = None, noinline: Optional[bool] = None,
                 repr: Optional[Callable] = None, launch_metadata: Optional[Callable] = None):
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise TypeError(f"@jit needs a Python function, got {type(fn).__name__}")
        _ki.register_kernel(self)
        self.fn = fn
        self.module = fn.__module__
        self.version = version
        self.signature = inspect.signature(fn)
        names = list(self.signature.parameters)
        dns = _index_set(do_not_specialize, names, "do_not_specialize", fn.__name__)
        dnsa = _index_set(do_not_specialize_on_alignment, names, "do_not_specialize_on_alignment", fn.__name__)
        self.do_not_specialize = list(do_not_specialize or [])
        self.do_not_specialize_on_alignment = list(do_not_specialize_on_alignment or [])
        self.params = [KernelParam(i, p, p.name in dns, p.name in dnsa)
                       for i, p in enumerate(self.signature.parameters.values())]
        self.arg_names = names
        self.constexprs = [p.num for p in self.params if p.is_constexpr]
        self.debug = debug
        self.noinline = noinline
        self._repr = repr
        self.launch_metadata = launch_metadata
        self.pre_run_hooks: list[Callable] = []
        self.used_globals: list = []
        self._src: Optional[str] = None
        self._src_override: Optional[str] = None  # set by _unsafe_update_src
        self._raw_src: Optional[list[str]] = None
        self._start_line: Optional[int] = None
        self._hash: Optional[str] = None
        self._kernel_cache: dict = {}
        self._locks: dict = {}
        self._locks_guard = threading.Lock()
        self._runner: Optional[Callable[..., Any]] = None
        # (grid, runner, partial) of the latest `kernel[grid]`: a call site passing the
        # same grid object again (a literal tuple, a module-level lambda) reuses it
        self._bound: tuple = (None, None, None)
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__globals__ = fn.__globals__
        self.__module__ = fn.__module__

    # ------------------------------------------------------------------ source and keys
    def _read_source(self) -> None:
        from ..frontend.source import SourceUnavailableError, source_lines

        try:
            lines, start, _file = source_lines(self.fn)
        except SourceUnavailableError as e:
            raise TegulaError(str(e)) from None
        self._raw_src, self._start_line = lines, start
        src = textwrap.dedent("".join(lines))
        m = re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE)
        self._src = src[m.start():] if m else src

    @property
    def src(self) -> str:
        if self._src is None:
            self._read_source()
        return self._src  # type: ignore[return-value]

    @property
    def raw_src(self) -> list[str]:
        if self._raw_src is None:
            self._read_source()
        return self._raw_src  # type: ignore[return-value]

    @property
    def starting_line_number(self) -> int:
        if self._start_line is None:
            self._read_source()
        return self._start_line  # type: ignore[return-value]

    @property
    def cache_key(self) -> str:
        """Hash of the source, of the @jit functions it calls and of the constexpr
        globals it reads (`dependencies.compute_cache_key`)."""
        if self._hash is None:
            from .dependencies import compute_cache_key

            self._hash = f"recursion:{self.module}.{self.__qualname__}"
            try:
                key, used = compute_cache_key(self)
            except BaseException:
                self._hash = None
                raise
            self._hash, self.used_globals = key, used
        return self._hash

    @property
    def hash(self) -> Optional[str]:
        return self._hash

    @property
    def used_global_vals(self) -> Optional[dict]:
        """Triton's view of the globals the kernel read when its key was computed:
        `{(name, id(namespace)): (value, namespace)}`. Assignable (PyTorch clears it
        before pickling a kernel and puts it back after)."""
        if "_used_global_vals" in self.__dict__:
            return self.__dict__["_used_global_vals"]
        return {(g.name, id(g.namespace)): (g.value, g.namespace) for g in self.used_globals}

    @used_global_vals.setter
    def used_global_vals(self, value: Optional[dict]) -> None:
        self.__dict__["_used_global_vals"] = value

    # What does not cross a process boundary: the generated launch function, locks,
    # compiled kernels (per process and device) and namespaces (the function's globals,
    # those of used globals); `fn` pickles by reference when it can (PyTorch sets it to
    # None first, as it does `__globals__` and `used_global_vals`).
    _UNPICKLED = ("_runner", "_bound", "_locks", "_locks_guard", "_kernel_cache", "used_globals",
                  "_used_global_vals", "_hash_lock", "__globals__", "_tegula_key", "run", "warmup")

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in self._UNPICKLED}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        _ki.register_kernel(self)
        self._runner = None
        self._bound = (None, None, None)
        self._locks = {}
        self._locks_guard = threading.Lock()
        self._kernel_cache = {}
        self.used_globals = []
        self.__globals__ = getattr(self.fn, "__globals__", None)

    def definition_site(self) -> str:
        """`file:line` of the `def` (after any decorators), for messages."""
        code = self.fn.__code__
        line = code.co_firstlineno
        try:
            for i, text in enumerate(self.raw_src):
                if text.lstrip().startswith("def "):
                    line = self.starting_line_number + i
                    break
        except TegulaError:
            pass
        return f"{code.co_filename}:{line}"

    # ------------------------------------------------------------------ calling and launching
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TegulaError(
            f"@jit function '{self.__name__}' cannot be called from Python; launch it with "
            f"{self.__name__}[grid](...) or call it from another @jit function")

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        # A launcher made before add_pre_run_hook/clear_cache keeps the launch function
        # it was made with (hooks added later do not run through it).
        # `partial` directly rather than through `binder.bind`: one Python call less on
        # every launch; and the latest one is reused for the same grid object (one
        # tuple, read and replaced whole, so concurrent launches never mix grids).
        # First, torch.compile's hooks (kernel_interface._torch_tracing).
        tracing = _ki._torch_tracing
        if tracing is None:
            if "torch" in _MODULES and _ki._probe_torch():
                return _ki._torch_launcher(self, grid)  # type: ignore[misc]
        elif tracing():
            return _ki._torch_launcher(self, grid)  # type: ignore[misc]
        runner = self._runner or self._build_runner()
        bound = self._bound
        if bound[0] is grid and bound[1] is runner:
            return bound[2]
        launch = partial(runner, grid)
        self._bound = (grid, runner, launch)
        return launch

    @public_entry
    def run(self, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        """Launch (or with `warmup=True` only compile); returns the CompiledKernel."""
        return (self._runner or self._build_runner())(grid, *args, _tg_warmup=warmup, **kwargs)

    @public_entry
    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> Any:
        """Compile for these arguments without launching. Dtypes (torch, numpy, tl) may
        stand in for tensors: `k.warmup(torch.float16, torch.float16, 1024, grid=(1,), BLOCK=64)`."""
        wrap, params = MockTensor.wrap_dtype, self.params
        if any(wrap(a) is not a for a in args):
            args = tuple(a if i < len(params) and params[i].is_constexpr else wrap(a) for i, a in enumerate(args))
        if any(wrap(v) is not v for v in kwargs.values()):
            cx = {p.name for p in params if p.is_constexpr}
            kwargs = {k: (v if k in cx else wrap(v)) for k, v in kwargs.items()}
        return (self._runner or self._build_runner())(grid, *args, _tg_warmup=True, **kwargs)

    def _build_runner(self) -> Callable[..., Any]:
        # Built on first use, so decorating a kernel stays cheap; the source key is
        # computed first because the launch function checks the globals it found.
        try:
            self.cache_key
        except TegulaError:
            pass  # no source: the compile reports it
        self._runner = build_runner(self)
        return self._runner

    def add_pre_run_hook(self, hook: Callable[..., Any]) -> None:
        """Call `hook(*args, **kwargs)` before every launch."""
        if not callable(hook):
            raise TypeError("a pre-run hook must be callable")
        self.pre_run_hooks.append(hook)
        self._runner = None

    def clear_cache(self) -> None:
        """Forget compiled kernels and the source key (they are rebuilt on demand)."""
        self._kernel_cache.clear()
        self._hash = None
        self.used_globals = []
        self._runner = None

    @property
    def kernel_cache(self) -> dict:
        """The in-memory cache: launch key -> CompiledKernel (for inspection)."""
        return self._kernel_cache

    @property
    def device_caches(self) -> dict:
        """Triton's view of the compiled variants: device -> (kernels, target, backend,
        binder), `kernels` mapping each launch key compiled for that device to its
        CompiledKernel (tests count variants with `len(device_caches[dev][0])`)."""
        out: dict = {}
        for key, kernel in list(self._kernel_cache.items()):
            device = getattr(kernel, "device", None)
            if device not in out:
                out[device] = ({}, getattr(kernel.metadata, "target", None), getattr(kernel, "backend", None),
                               self._runner)
            out[device][0][key] = kernel
        return out

    def _unsafe_update_src(self, new_src: str) -> None:
        """Replace the kernel's source text (Triton's hook for tests that build variants
        of a kernel by editing it): later compiles parse `new_src`, with the function's
        globals; compiled variants and the source key are dropped."""
        self._src = new_src
        self._src_override = new_src
        self._raw_src = new_src.splitlines(keepends=True)
        self.clear_cache()

    # ------------------------------------------------------------------ the cache miss
    def _key_lock(self, key: Any) -> threading.Lock:
        with self._locks_guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    def _compile_miss(self, key: tuple, values: tuple, opts: dict, warmup: bool = False) -> Any:
        # Compiles for different keys run in parallel (the autotuner warms configs up on
        # a thread pool); the same key compiles once.
        with self._key_lock(key):
            kernel = self._kernel_cache.get(key)
            if kernel is None:
                kernel = self._compile(key, values, opts, warmup)
                if kernel is not _SKIPPED:
                    self._kernel_cache[key] = kernel
        with self._locks_guard:
            self._locks.pop(key, None)
        return kernel

    def _compile(self, key: tuple, values: tuple, opts: dict, warmup: bool = False) -> Any:
        from . import backend_registry
        from .compiler import compile
        from .source import ASTSource

        interpret, knob_debug, knob_checked = (tuple(key[-2]) + (False, False, False))[:3]
        specs = compute_specs(self.params, values)
        spec = S.describe_specs(self.arg_names, [p.is_constexpr for p in self.params],
                                specs, values, self.__name__,
                                [not (p.do_not_specialize or p.do_not_specialize_on_alignment) for p in self.params])
        debug = opts.get("debug")
        debug = bool((self.debug if debug is None else debug) or knob_debug)
        what = f"the launch of kernel '{self.__name__}' ({self.definition_site()})"
        try:
            checked = bool(opts.get("checked") or knob_checked)
            given = {**opts, "debug": debug, "checked": checked}
            # option defaults from knobs, as the key saw them (a change recompiles)
            flags = dict(zip(LAUNCH_KNOBS, key[-2])) if isinstance(key[-2], tuple) else {}
            for option, knob in (("enable_fp_fusion", "default_fp_fusion"), ("arch", "override_arch")):
                if given.get(option) is None and knob in flags:
                    given[option] = flags[knob] if option != "arch" else (flags[knob] or None)
            options = CompileOptions.from_dict(given, strict=True, what=what, params=self.arg_names)
        except KernelArgumentError as e:
            if what in str(e):
                raise
            raise type(e)(f"{what}: {e}") from None  # the same kind (an AssertionError too, ...)
        first = next((nm for nm, sp in zip(self.arg_names, specs)
                      if sp[0].startswith("*") and sp[2] == spec.device), "")
        backend, device = backend_registry.backend_for_device(spec.device, interpret, self.__name__, first)
        target = backend.current_target(device)
        src = ASTSource(self, spec.signature, spec.constexprs, spec.attrs)
        from ..knobs import runtime as hooks

        cache_hook = hooks.jit_cache_hook
        if cache_hook is not None and self._call_hook(cache_hook, key, src, device, options, warmup):
            return _SKIPPED
        try:
            kernel = compile(src, target=target, options=options, device=device)
        except CompilationError as e:
            if backend.name != "interpreter" or isinstance(e, InterpreterError):
                raise
            # Triton's interpreter reports these as InterpreterError (see runtime.errors)
            raise InterpreterCompilationError.from_error(e) from e.__cause__
        if hooks.jit_post_compile_hook is not None:
            self._call_hook(hooks.jit_post_compile_hook, key, src, device, options, warmup)
        return kernel

    def _call_hook(self, hook: Callable[..., Any], key: Any, src: Any, device: Any, options: CompileOptions,
                   is_warmup: bool) -> Any:
        """Call a `knobs.runtime` JIT hook with Triton's keyword arguments: `key`, `repr`
        (`name[num_warps=..., ...](param: type, ...)`), `fn` (`JitFunctionInfo`),
        `compile` (the compile's description), `is_manual_warmup`, `already_compiled`."""
        sig = src.signature
        arg_reprs = ", ".join(f"{p.name}: {sig.get(p.name, 'constexpr')}" for p in self.params)
        repr_ = (f"{self.__qualname__}[num_warps={options.num_warps}, num_ctas={options.num_ctas}, "
                 f"num_stages={options.num_stages}, enable_fp_fusion={options.enable_fp_fusion}, "
                 f"launch_cooperative_grid={options.launch_cooperative_grid}]({arg_reprs})")
        info = {
            "key": key, "signature": dict(sig), "device": device, "constants": dict(src.constexprs),
            "num_warps": options.num_warps, "num_ctas": options.num_ctas, "num_stages": options.num_stages,
            "enable_fp_fusion": options.enable_fp_fusion, "launch_cooperative_grid": options.launch_cooperative_grid,
            "extern_libs": options.extern_libs or (),
            "configs": [{(self.arg_names.index(n),): [["tt.divisibility", a.divisibility]]
                         for n, a in src.attrs.items() if a.divisibility > 1}],
            "specialization_data": repr((self.__qualname__, dict(sig), sorted(src.constexprs.items(), key=str))),
            "is_warmup": is_warmup,
        }
        return hook(key=key, repr=repr_, fn=JitFunctionInfo(self.module, self.__qualname__, self), compile=info,
                    is_manual_warmup=is_warmup, already_compiled=False)

    def _globals_changed(self) -> None:
        for g in self.used_globals:
            if g.changed():
                raise TegulaError(
                    f"global '{g.name}' used by @jit function '{self.__name__}' changed from "
                    f"{g.value!r} to {g.namespace.get(g.name)!r} after the kernel was compiled; pass "
                    "values that change as constexpr parameters instead")

    # ------------------------------------------------------------------ error messages
    def _binding_error(self, values: tuple, extra: tuple, opts: dict, no_arg: Any) -> None:
        """Raise the KernelArgumentError of a launch whose arguments do not fit."""
        params = self.params
        problems = []
        if extra:
            given = len(params) + len(extra)
            problems.append(f"got {given} positional arguments for {len(params)} parameters")
        missing = [p.name for p, v in zip(params, values) if v is no_arg]
        if missing:
            problems.append("missing " + ", ".join(f"'{m}'" for m in missing))
        # A misspelled keyword is usually why a parameter is missing: name it too.
        from .options import OTHER_TARGET_OPTIONS

        known = CompileOptions.field_names() | OTHER_TARGET_OPTIONS
        for k in opts:
            if k not in known:
                close = difflib.get_close_matches(k, [*(missing or self.arg_names), *known], n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                problems.append(f"unexpected keyword argument '{k}'{hint}")
        expected = ", ".join(p.describe() for p in params)
        raise KernelArgumentError(
            f"kernel '{self.__name__}' ({self.definition_site()}): {'; '.join(problems)}. "
            f"Its parameters are ({expected})")

    def repr(self, _: Any = None) -> str:
        return f"{self.module}.{self.__qualname__}" if self._repr is None else self._repr(_)

    def __repr__(self) -> str:
        return f"JITFunction({self.module}:{self.__qualname__})"


def jit(fn: Optional[Callable] = None, *, version: Any = None, repr: Optional[Callable] = None,
        launch_metadata: Optional[Callable] = None,
        do_not_specialize: Optional[Iterable[Union[int, str]]] = None,
        do_not_specialize_on_alignment: Optional[Iterable[Union[int, str]]] = None,
        debug: Optional[bool] = None, noinline: Optional[bool] = None) -> Any:
    """Decorator making a kernel (or a device function callable from kernels): `@jit`
    or `@jit(do_not_specialize=["n"], debug=True, ...)`."""

    def decorator(f: Callable) -> JITFunction:
        return JITFunction(f, version=version, do_not_specialize=do_not_specialize,
                           do_not_specialize_on_alignment=do_not_specialize_on_alignment,
                           debug=debug, noinline=noinline, repr=repr, launch_metadata=launch_metadata)

    return decorator(fn) if fn is not None else decorator
