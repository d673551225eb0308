"""`tegula.autotune` and `tegula.Config`: pick the fastest launch configuration per input.

Triton 3.6 semantics: the tuning key is the values of the `key` arguments plus every
argument's dtype; a new key benchmarks every (pruned) config and caches the winner, a
repeated key reuses it; `prune_configs_by` ({early_config_prune, perf_model, top_k})
narrows the candidates; `reset_to_zero`, `restore_value`, `pre_hook`, `post_hook`,
`do_bench`, `warmup`, `rep`, `use_cuda_graph` and `cache_results` as documented there;
`best_config`, `cache`, `configs_timings`, `bench_time` (the whole tuning's seconds)
afterwards, plus tegula's `compile_time` (its compile part) and `failed_configs`
(config -> why it was skipped).

Where tegula does better:
- Tuning never corrupts the caller's data: the arguments the compiled kernel writes
  (`compiled.metadata.written_args`) are snapshotted before benchmarking and restored
  after each config, without the user naming them (see `arg_snapshot`).
- Candidates compile in parallel (a thread pool over `fn.warmup`) before any is timed;
  a config that fails to compile or exceeds the device is skipped with its reason, and
  `AutotunerError` lists the reasons when none survives.
- `reset_to_zero` / `restore_value` keep working when a user `pre_hook`/`post_hook` is
  given (Triton silently drops them then). `self.pre_hook` / `self.post_hook` are
  still called around every benchmarked run, as in Triton, so a subclass that installs
  its own (FLA's `CachedAutotuner`) keeps working.
- Repeatable choice within measured noise (the near-fastest configs timed a second
  time, back to back, so that the GPU's clock drift during tuning does not decide),
  progress bar, `TEGULA_PRINT_AUTOTUNING`,
  on-disk results (`autotuner_report`, `autotuner_cache`), also under the interpreter.
- Mistakes are named early: `reset_to_zero`/`restore_value` names that are not kernel
  arguments fail at decoration, `key` names that are not arguments warn (Triton
  ignores them, so the kernel never retunes), and passing a value a config sets
  (a meta-parameter or `num_warps`...) is a ValueError on every launch, cached or not.
"""
from __future__ import annotations

import inspect
import math
import os
import platform
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import cached_property
from typing import Any, Callable, Optional, Sequence

from tegula.config import knobs
from tegula.errors import (
    AutotunerError,
    CompilationError,
    InternalCompilerError,
    KernelArgumentError,
    OutOfResources,
    TegulaError,
)

from . import autotuner_cache
from .arg_snapshot import ArgSnapshot, is_array_like, zero_
from .autotune_config import Config
from .autotuner_report import TuningProgress, choose_best, contenders, print_table
from .config_groups import equivalent_configs, options_without_effect, timed_once_per_group

# Triton defines Heuristics and heuristics in triton.runtime.autotuner
from .heuristics import Heuristics, heuristics  # noqa: F401
from .kernel_interface import KernelInterface, register_kernel

__all__ = ["Autotuner", "Config", "autotune"]

_INF3 = [math.inf, math.inf, math.inf]


def _base_function(fn: Any) -> Any:
    base = fn
    while not inspect.isfunction(base) and hasattr(base, "fn"):
        base = base.fn
    return base


def _jit_function(fn: Any) -> Any:
    """The innermost @jit object under any stack of Autotuner/Heuristics wrappers."""
    obj = fn
    while not getattr(obj, "_tegula_jit", False) and hasattr(obj, "fn") and not inspect.isfunction(obj):
        obj = obj.fn
    return obj


def _on_gpu(values: Any) -> bool:
    for v in values:
        if getattr(v, "is_cuda", False) or hasattr(v, "__cuda_array_interface__"):
            return True
        dlpack_device = getattr(v, "__dlpack_device__", None)
        if dlpack_device is not None and not hasattr(v, "__array_interface__"):
            try:
                if dlpack_device()[0] in (2, 3, 13):  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
                    return True
            except Exception:
                pass
    return False


_NO_DTYPE = object()
_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    # str() of a numpy dtype costs microseconds; a launch computes it for every argument.
    try:
        name = _DTYPE_NAMES.get(dtype)
        if name is None:
            name = _DTYPE_NAMES[dtype] = str(dtype)
        return name
    except TypeError:  # an unhashable dtype object
        return str(dtype)


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def _written_args(compiled: Any) -> Optional[set[str]]:
    """Names the compiled kernel(s) store to, or None when the compiler did not say."""
    if isinstance(compiled, (list, tuple)):
        names: set[str] = set()
        for c in compiled:
            part = _written_args(c)
            if part is None:
                return None
            names |= part
        return names
    metadata = getattr(compiled, "metadata", None)
    if isinstance(metadata, dict):
        written = metadata.get("written_args")
    else:
        written = getattr(metadata, "written_args", None)
    return None if written is None else set(written)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_SKIPPED_ERRORS = (CompilationError, OutOfResources)


def _is_internal(exc: BaseException) -> bool:
    """Whether a config's compile failed on a fault of the compiler's own (a pass's, or
    an exception tegula did not raise on purpose) rather than on the config: fla's
    prepare_wy_repr_bwd lost its 4- and 8-warp configs to one, silently."""
    return isinstance(exc, InternalCompilerError) or not isinstance(exc, TegulaError)


class Autotuner(KernelInterface):
    """The object `@autotune` makes: a kernel that picks its config per tuning key."""

    def __init__(self, fn: Any, arg_names: Sequence[str], configs: Sequence[Config], key: Sequence[str],
                 reset_to_zero: Optional[Sequence[str]] = None, restore_value: Optional[Sequence[str]] = None,
                 pre_hook: Optional[Callable[..., Any]] = None,
                 post_hook: Optional[Callable[..., Any]] = None,
                 prune_configs_by: Optional[dict[str, Any]] = None, warmup: Optional[float] = None,
                 rep: Optional[float] = None, use_cuda_graph: bool = False,
                 do_bench: Optional[Callable[..., Any]] = None, cache_results: bool = False) -> None:
        register_kernel(self)
        self.configs = list(configs) if configs else [Config({}, num_warps=4, num_stages=3, num_ctas=1)]
        self.keys = [key] if isinstance(key, str) else list(key)
        self.cache: dict[tuple, Config] = {}
        self.arg_names = list(arg_names)
        self._arg_name_set = frozenset(self.arg_names)
        self.cache_results = cache_results
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        for what, names in (("reset_to_zero", self.reset_to_zero), ("restore_value", self.restore_value)):
            unknown = [n for n in names if n not in self._arg_name_set]
            if unknown:
                raise ValueError(f"autotune({what}=...) names {unknown}, which are not arguments of the "
                                 f"kernel (its arguments: {self.arg_names})")
        unknown_keys = [k for k in self.keys if k not in self._arg_name_set]
        if unknown_keys:
            # Triton ignores such names silently, so the kernel never retunes on them.
            warnings.warn(f"autotune(key=...) names {unknown_keys}, which are not arguments of the kernel "
                          f"(its arguments: {self.arg_names}); they are ignored", stacklevel=3)
        self.user_defined_pre_hook = pre_hook is not None
        self.user_defined_post_hook = post_hook is not None
        self.pre_hook = pre_hook if pre_hook is not None else (lambda kwargs, reset_only=False: None)
        self.post_hook = post_hook if post_hook is not None else (lambda kwargs, exception: None)
        self.perf_model = None
        self.configs_top_k: Any = 1.0
        self.early_config_prune = None
        if prune_configs_by:
            self.perf_model = prune_configs_by.get("perf_model", self.perf_model)
            self.configs_top_k = prune_configs_by.get("top_k", self.configs_top_k)
            self.early_config_prune = prune_configs_by.get("early_config_prune", self.early_config_prune)
        self.fn = fn
        self.base_fn = _base_function(fn)
        # a plain attribute: subclasses of Triton's Autotuner assign it (FlagGems' LibTuner)
        self.__name__ = self.base_fn.__name__
        self._do_bench = do_bench
        self.num_warmups = warmup
        self.num_reps = rep
        self.use_cuda_graph = use_cuda_graph
        self.nargs: Optional[dict[str, Any]] = None
        self.best_config: Optional[Config] = None
        self.configs_timings: dict[Config, Any] = {}
        self.failed_configs: dict[Config, str] = {}  # tegula: why each skipped config failed
        self.bench_time = 0.0
        self.compile_time = 0.0
        self._bench_device = "cpu"
        # Names a caller must not pass because the configs set them (checked on every
        # launch); recomputed if the user assigns a new list to `kernel.configs`.
        self._tuned_for: Optional[list[Config]] = None
        self._tuned_names: frozenset[str] = frozenset()

    @cached_property
    def do_bench(self) -> Callable[..., Any]:
        if self._do_bench is not None:
            return self._do_bench
        from tegula import testing

        if self.use_cuda_graph:
            return lambda fn, quantiles: testing.do_bench_cudagraph(
                fn, rep=self.num_reps if self.num_reps is not None else 100, quantiles=quantiles)
        # The clock follows the arguments: CUDA events for GPU data, the host clock for
        # numpy/CPU data even on a machine that has a GPU.
        return lambda fn, quantiles: testing.do_bench(
            fn, warmup=self.num_warmups if self.num_warmups is not None else 25,
            rep=self.num_reps if self.num_reps is not None else 100, quantiles=quantiles,
            device=self._bench_device)

    # ------------------------------------------------------------------ launch
    def _check_conflicts(self, kwargs: dict[str, Any]) -> None:
        if self._tuned_for is not self.configs:
            self._tuned_names = frozenset(k for c in self.configs for k in c.all_kwargs())
            self._tuned_for = self.configs
        conflicts = self._tuned_names.intersection(kwargs)
        if conflicts:
            names = ", ".join(sorted(conflicts))
            raise ValueError(f"Conflicting meta-parameters: {names}. Make sure that you don't re-define "
                             f"auto-tuned symbols: kernel '{self.__name__}' gets {names} from its autotuning "
                             f"configs, so do not also pass them at the launch.")

    def _tuning_key(self, kwargs: dict[str, Any]) -> tuple:
        # Triton's key: the `key` arguments' values, then str(dtype) of every argument that
        # has one (positional first, then keywords). Written for the launch hot path.
        nargs = self.nargs
        if kwargs and not self._arg_name_set.isdisjoint(kwargs):
            nargs = {**nargs, **{k: v for k, v in kwargs.items() if k in self._arg_name_set}}
        key = [_hashable(nargs[k]) for k in self.keys if k in nargs]
        for value in nargs.values():
            dtype = getattr(value, "dtype", _NO_DTYPE)
            if dtype is not _NO_DTYPE:
                key.append(_dtype_name(dtype))
        return tuple(key)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.nargs = dict(zip(self.arg_names, args))
        try:
            self._check_conflicts(kwargs)
            if len(self.configs) > 1:
                key = self._tuning_key(kwargs)
                config = self.cache.get(key)
                if config is None:
                    config = self._tune(key, args, kwargs)
            else:
                config = self.configs[0]
            self.best_config = config
            if config.pre_hook is not None:
                config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    def prune_configs(self, kwargs: dict[str, Any]) -> list[Config]:
        pruned = self.configs
        if self.early_config_prune:
            pruned = list(self.early_config_prune(self.configs, self.nargs, **kwargs))
            if not pruned:
                raise AutotunerError(f"No valid autotuner configs after pruning for kernel "
                                     f"'{self.__name__}': `early_config_prune` should return at least "
                                     "one config.")
        if self.perf_model:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(pruned) * top_k))
            elif not isinstance(top_k, int):
                raise TypeError("Error while pruning configs, top_k must be either 1) a float <= 1.0 "
                                "or 2) an int")
            if len(pruned) > top_k:
                estimates = {c: self.perf_model(**self.nargs, **kwargs, **c.all_kwargs()) for c in pruned}
                pruned = sorted(pruned, key=lambda c: estimates[c])[:top_k]
        return list(pruned)

    def warmup(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Compile every (pruned) config for these arguments, in parallel; no launch."""
        self.nargs = dict(zip(self.arg_names, args))
        try:
            configs = self.prune_configs(kwargs)
            results = self._compile_all(configs, args, kwargs)
        finally:
            self.nargs = None
        out = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            out.append(result)
        return out

    # ------------------------------------------------------------------ tuning
    def _compile_all(self, configs: Sequence[Config], args: tuple, kwargs: dict[str, Any],
                     progress: Optional[TuningProgress] = None) -> list[Any]:
        """fn.warmup for each config, concurrently; an exception object where one failed."""
        warm = getattr(self.fn, "warmup", None)
        if warm is None:
            return [None] * len(configs)
        kw = {k: v for k, v in kwargs.items() if k != "warmup"}

        def compile_one(config: Config) -> Any:
            try:
                return warm(*args, **kw, **config.all_kwargs())
            except Exception as e:  # recorded per config; the caller decides what is fatal
                return e

        results: list[Any] = [None] * len(configs)
        # A config's pre_hook may change the arguments the kernel specializes on (Triton's
        # tutorials set host TensorDescriptors' block shapes there): those configs are not
        # compiled ahead; each compiles when it is first timed, right after its hook ran,
        # as in Triton (None here: not compiled yet, not failed).
        hooked = [i for i, c in enumerate(configs) if c.pre_hook is not None]
        done = len(hooked)
        free = [i for i in range(len(configs)) if i not in set(hooked)]
        if len(free) <= 1:
            for i in free:
                results[i] = compile_one(configs[i])
            return results
        # At least a few threads even on a small machine: much of a GPU compile waits on
        # ptxas subprocesses and LLVM, which release the GIL.
        workers = min(len(free), max(4, os.cpu_count() or 1), 16)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tegula-autotune") as pool:
            futures = {pool.submit(compile_one, configs[i]): i for i in free}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                done += 1
                if progress is not None:
                    progress.update(done, "compiled")
        return results

    def _disk_key(self, key: tuple, configs: Sequence[Config], values: Sequence[Any]) -> list[str]:
        import tegula

        jit = _jit_function(self.fn)
        kernel_hash = str(getattr(jit, "cache_key", getattr(jit, "__qualname__", repr(jit))))
        chain, obj = [], self.fn
        while obj is not jit and hasattr(obj, "fn"):
            chain.append(f"{type(obj).__name__}:{sorted(getattr(obj, 'values', {}) or {})}")
            obj = obj.fn
        if knobs.interpret:
            device = "interpreter"
        elif _on_gpu(values):
            from .driver import driver

            cuda = driver.for_backend("cuda")
            props = cuda.utils.get_device_properties(cuda.get_current_device())
            device = f"cuda:{props['name']}:{cuda.get_current_target()}"
        else:
            device = f"cpu:{platform.machine()}"
        bench = ("custom" if self._do_bench is not None
                 else f"{self.num_warmups}:{self.num_reps}:{self.use_cuda_graph}")
        hooks = [getattr(c.pre_hook, "__qualname__", repr(c.pre_hook)) for c in configs]
        return [getattr(tegula, "__version__", "0"), kernel_hash, device, "|".join(chain), str(key), bench,
                *map(str, configs), *hooks]

    def _tune(self, key: tuple, args: tuple, kwargs: dict[str, Any]) -> Config:
        configs = self.prune_configs(kwargs)
        if len(configs) == 1:  # nothing to compare: no benchmarking (as Triton)
            self.cache[key] = configs[0]
            return configs[0]
        values = list(self.nargs.values()) + list(kwargs.values())
        path = None
        if self.cache_results or knobs.cache_autotuning:
            path = autotuner_cache.cache_file(self._disk_key(key, configs, values))
            hit = autotuner_cache.load(path, [str(c) for c in configs])
            if hit is not None:
                best = configs[hit.best_index]
                self.cache[key] = best
                self.configs_timings = dict(zip(configs, hit.timings))
                self.failed_configs = {configs[i]: r for i, r in hit.failures.items()}
                if knobs.print_autotuning:
                    print_table(self.__name__, key, configs, hit.timings, hit.failures, hit.best_index,
                                0.0, 0.0, source=f"loaded from {path}")
                return best
        self._bench_device = "cuda" if (_on_gpu(values) and not knobs.interpret) else "cpu"
        groups = equivalent_configs(configs, options_without_effect(self._bench_device))
        best_index, timings, failures = timed_once_per_group(
            lambda cs: self._benchmark_all(key, cs, args, kwargs), configs, groups)
        if len(groups) < len(configs):
            self.configs_timings = dict(zip(configs, timings))
            self.failed_configs = {configs[i]: r for i, r in failures.items()}
        best = configs[best_index]
        self.cache[key] = best
        if path is not None:
            autotuner_cache.store(path, kernel=self.__name__, key=str(key),
                                  config_strs=[str(c) for c in configs], best_index=best_index,
                                  timings=timings, failures=failures)
        return best

    def _benchmark_all(self, key: tuple, configs: list[Config], args: tuple,
                       kwargs: dict[str, Any]) -> tuple[int, list[Any], dict[int, str]]:
        progress = TuningProgress(self.__name__, len(configs))
        t0 = time.perf_counter()
        compiled = self._compile_all(configs, args, kwargs, progress)
        t1 = time.perf_counter()
        failures: dict[int, str] = {}
        written: Optional[set[str]] = set()
        for i, result in enumerate(compiled):
            if isinstance(result, KernelArgumentError):
                progress.close()
                raise result  # the launch itself is wrong, whatever the config
            if isinstance(result, Exception):
                self._record_failure(failures, i, configs[i], result)
                continue
            part = _written_args(result)
            written = None if (written is None or part is None) else written | part
        named = {**self.nargs, **kwargs}
        # Unknown written set (a backend that does not report it): save every buffer.
        to_save = ([n for n, v in named.items() if is_array_like(v)] if written is None
                   else [n for n in named if n in written])
        snapshot = ArgSnapshot.take(named, [*to_save, *self.restore_value], tracked=self.restore_value)
        if snapshot.skipped:
            warnings.warn(f"autotuning '{self.__name__}': cannot snapshot {snapshot.skipped}; "
                          "tuning may leave them modified", stacklevel=4)
        timings: list[Any] = []
        try:
            for i, config in enumerate(configs):
                if i in failures:
                    timings.append(list(_INF3))
                    continue
                try:
                    timings.append(self._bench_config(args, config, kwargs, snapshot))
                except (*_SKIPPED_ERRORS, InternalCompilerError) as e:  # compiled lazily: no warmup
                    self._record_failure(failures, i, config, e)
                    timings.append(list(_INF3))
                finally:
                    snapshot.restore()
                progress.update(i + 1, "benchmarked")
            if self._do_bench is None:
                # The first configs timed meet a cool GPU that holds a higher clock
                # (up to 10% on an H200 under a long tensor-core kernel), the later ones
                # a hot one: the near-fastest are timed again, back to back in reverse
                # order, and chosen between on those timings (a user's own `do_bench`
                # is left to measure as it sees fit).
                for i in reversed(contenders(timings)):
                    try:
                        timings[i] = self._bench_config(args, configs[i], kwargs, snapshot)
                    finally:
                        snapshot.restore()
        finally:
            snapshot.restore()
            progress.close()
        t2 = time.perf_counter()
        # bench_time is the whole tuning, as in Triton (where compiling happens inside it).
        self.compile_time, self.bench_time = t1 - t0, t2 - t0
        self.configs_timings = dict(zip(configs, timings))
        self.failed_configs = {configs[i]: r for i, r in failures.items()}
        best_index = choose_best(timings)
        if best_index is None:
            raise AutotunerError(self._no_survivor_message(configs, failures))
        best = configs[best_index]
        # As Triton: the reset_to_zero arguments are zero for the launch that follows.
        full_nargs = {**named, **best.all_kwargs()}
        for name in self.reset_to_zero:
            zero_(full_nargs.get(name))
        # Called whether or not the user gave one, as Triton does: subclasses (FLA's
        # CachedAutotuner) install their own pre/post hooks after __init__ and rely on
        # the pre hook running before each post hook.
        self.pre_hook(full_nargs, reset_only=True)
        if knobs.print_autotuning:
            print_table(self.__name__, key, configs, timings, failures, best_index, self.compile_time,
                        self.bench_time - self.compile_time)
        return best_index, timings, failures

    def _record_failure(self, failures: dict[int, str], i: int, config: Config, exc: BaseException) -> None:
        """Config `i` is skipped for `exc`; a fault of the compiler's own also warns."""
        failures[i] = _reason(exc)
        if _is_internal(exc):
            warnings.warn(f"autotuning '{self.__name__}': config {config} skipped: the compiler failed on it "
                          f"(a tegula bug, please report it): {failures[i]}", stacklevel=5)

    def _bench(self, *args: Any, config: Config, **meta: Any) -> Any:
        """Triton's signature: the [median, 20%, 80%] run times of `config` on these
        arguments (infinite for a config that cannot run: out of resources, ...).
        Subclasses call it from their own tuning loops (FlagGems' LibTuner); the
        `restore_value` arguments are restored after each run, as in Triton."""
        own_nargs = self.nargs is None  # called outside `run`, which sets them
        if own_nargs:
            self.nargs = dict(zip(self.arg_names, args))
        snapshot = ArgSnapshot.take({**self.nargs, **meta}, self.restore_value, tracked=self.restore_value)
        try:
            return self._bench_config(args, config, meta, snapshot)
        except _SKIPPED_ERRORS:
            return list(_INF3)  # as Triton's: a config that cannot run times as infinite
        finally:
            snapshot.restore()
            if own_nargs:
                self.nargs = None

    def _bench_config(self, args: tuple, config: Config, kwargs: dict[str, Any], snapshot: ArgSnapshot) -> Any:
        current = dict(kwargs, **config.all_kwargs())
        full_nargs = {**self.nargs, **current}

        def kernel_call() -> None:
            if config.pre_hook:
                config.pre_hook(full_nargs)
            for name in self.reset_to_zero:
                zero_(full_nargs.get(name))
            self.pre_hook(full_nargs)
            try:
                self.fn.run(*args, **current)
            except Exception as e:
                try:
                    self.post_hook(full_nargs, exception=e)
                finally:
                    snapshot.restore(self.restore_value)
                raise
            self.post_hook(full_nargs, exception=None)
            # restore_value promises that every run sees the original values (Triton).
            snapshot.restore(self.restore_value)

        return self.do_bench(kernel_call, quantiles=(0.5, 0.2, 0.8))

    def _no_survivor_message(self, configs: Sequence[Config], failures: dict[int, str]) -> str:
        by_reason: dict[str, list[int]] = {}
        for i, reason in failures.items():
            by_reason.setdefault(reason, []).append(i)
        lines = [f"no autotuning config of kernel '{self.__name__}' could run ({len(configs)} tried)"]
        # Configs failing for the same reason are grouped, so a mistake common to all of
        # them (a compile error in the kernel) is shown once, with its source location.
        for reason, idx in by_reason.items():
            head = "every config" if len(idx) == len(configs) else f"{len(idx)} config(s)"
            lines.append(f"{head} failed with {reason}")
            lines += [f"    [{i}] {configs[i]}" for i in idx]
        return "\n".join(lines)


def autotune(configs: Sequence[Config], key: Sequence[str], prune_configs_by: Optional[dict[str, Any]] = None,
             reset_to_zero: Optional[Sequence[str]] = None, restore_value: Optional[Sequence[str]] = None,
             pre_hook: Optional[Callable[..., Any]] = None, post_hook: Optional[Callable[..., Any]] = None,
             warmup: Optional[float] = None, rep: Optional[float] = None, use_cuda_graph: bool = False,
             do_bench: Optional[Callable[..., Any]] = None,
             cache_results: bool = False) -> Callable[[Any], Autotuner]:
    """Decorator: tune a `@jit` kernel (or a `@heuristics` one) over `configs`, once per
    distinct value of the `key` arguments (and argument dtypes). See the module docstring."""

    def decorator(fn: Any) -> Autotuner:
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)

    return decorator
