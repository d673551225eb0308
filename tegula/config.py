"""Every environment knob of tegula, declared once, typed and documented.

No other module reads `os.environ`: they read `tegula.config.knobs.<name>`, which
re-reads the environment on each access (so tests can monkeypatch variables). Each knob
has a `TEGULA_*` name and, where Triton has one, the `TRITON_*` alias; the TEGULA name
wins when both are set.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional


def _bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _bool_or_auto(text: str) -> Optional[bool]:
    """A switch that may also be left to the compiler: empty or `auto` is None."""
    return None if text.strip().lower() in ("", "auto") else _bool(text)


@dataclass(frozen=True)
class Knob:
    name: str
    alias: Optional[str]
    parse: Callable[[str], Any]
    default: Any
    doc: str

    def read(self) -> Any:
        for var in (self.name, self.alias):
            if var and var in os.environ and os.environ[var] != "":
                return self.parse(os.environ[var])
        return self.default() if callable(self.default) else self.default


KNOBS: dict[str, Knob] = {}


def _knob(attr: str, name: str, alias: Optional[str], parse, default, doc: str) -> None:
    KNOBS[attr] = Knob(name, alias, parse, default, doc)


_knob("interpret", "TEGULA_INTERPRET", "TRITON_INTERPRET", _bool, False,
      "Run every kernel on the numpy reference interpreter, whatever the arguments.")
_knob("compat", "TEGULA_COMPAT", None, _bool, False,
      "Resolve `import triton` to tegula in this process (set by `python -m tegula.compat` "
      "for the processes it starts; read by tegula/compat_site/sitecustomize.py).")
_knob("cpu_backend", "TEGULA_CPU_BACKEND", None, _bool, True,
      "Run kernels on host arrays on the compiled CPU backend (the default); 0: on the "
      "reference interpreter (as TEGULA_INTERPRET=1 does for every kernel).")
_knob("cpu_threads", "TEGULA_CPU_THREADS", None, int, 0,
      "Threads the CPU backend runs a grid on (0: one per core).")
_knob("cpu_streaming_stores", "TEGULA_CPU_STREAMING_STORES", None, _bool, True,
      "Let the CPU backend write large outputs (beyond the threads' private caches) with "
      "non-temporal stores (0: regular stores always).")
_knob("cpu_bounds_check", "TEGULA_CPU_BOUNDS_CHECK", None, _bool, True,
      "Bounds-check every load and store of the CPU backend (off: faster, unchecked).")
_knob("cache_dir", "TEGULA_CACHE_DIR", "TRITON_CACHE_DIR", str,
      lambda: os.path.join(os.path.expanduser("~"), ".cache", "tegula"),
      "Directory of the on-disk compilation cache.")
_knob("debug", "TEGULA_DEBUG", "TRITON_DEBUG", _bool, False,
      "Compile every kernel in debug mode, as Triton's debug=True: device_assert on.")
_knob("checked", "TEGULA_CHECKED", None, _bool, False,
      "Compile every kernel in checked mode (as launch option checked=True): compiled backends "
      "bounds-check loads and stores and report failures after each launch (a sync per launch).")
_knob("default_fp_fusion", "TEGULA_DEFAULT_FP_FUSION", "TRITON_DEFAULT_FP_FUSION", _bool, True,
      "The default of the enable_fp_fusion launch option (0: a*b+c stays a multiply and an add "
      "unless a launch asks for fusion); read at each launch.")
_knob("f32_default", "TEGULA_F32_DEFAULT", "TRITON_F32_DEFAULT", lambda t: t.strip().lower(), "",
      "The input precision of f32 tl.dot calls that name none (tf32, tf32x3, ieee, bf16x3, "
      "bf16x6); when set it wins over allow_tf32, as in Triton. Read when a kernel compiles.")
_knob("override_arch", "TEGULA_OVERRIDE_ARCH", "TRITON_OVERRIDE_ARCH", str, "",
      "Compile CUDA kernels for this architecture (sm80, sm90, ...) instead of the device's, as "
      "the `arch=` launch option does (which wins over it); read at each launch.")
_knob("dump_dir", "TEGULA_DUMP_DIR", None, str, "",
      "When set, write every compilation stage's text (tir, tir_opt, ...) here.")
_knob("override_dir", "TEGULA_OVERRIDE_DIR", None, str, "",
      "When set, a stage file found here replaces the compiler's output for that stage.")
_knob("debug_frontend", "TEGULA_DEBUG_FRONTEND", None, _bool, False,
      "Keep tegula's internal traceback on CompilationError (for tegula developers).")
_knob("print_autotuning", "TEGULA_PRINT_AUTOTUNING", "TRITON_PRINT_AUTOTUNING", _bool, False,
      "Print each autotuning config's time and the total tuning time.")
_knob("cache_autotuning", "TEGULA_CACHE_AUTOTUNING", "TRITON_CACHE_AUTOTUNING", _bool, False,
      "Persist autotuning results on disk (as autotune(cache_results=True)).")
_knob("always_compile", "TEGULA_ALWAYS_COMPILE", "TRITON_ALWAYS_COMPILE", _bool, False,
      "Ignore the on-disk cache and recompile.")
_knob("verify_ir", "TEGULA_VERIFY_IR", None, _bool, False,
      "Verify the IR after every pass (always on in tests).")
_knob("ptxas", "TEGULA_PTXAS_PATH", "TRITON_PTXAS_PATH", str, "",
      "Path of the ptxas binary to use (else PATH, CUDA_HOME, the nvidia-cuda-nvcc wheel).")
_knob("cuda_home", "CUDA_HOME", "CUDA_PATH", str, "", "CUDA toolkit root (libdevice, ptxas).")
_knob("libdevice", "TEGULA_LIBDEVICE_PATH", "TRITON_LIBDEVICE_PATH", str, "",
      "Path of libdevice.10.bc (else found under the CUDA toolkit).")
_knob("dot_tensor_cores", "TEGULA_DOT_TENSOR_CORES", None, _bool, True,
      "Compute tl.dot on tensor cores where an instruction fits (0: every dot on FMAs).")
_knob("wgmma", "TEGULA_WGMMA", None, _bool, True,
      "On sm_90a, compute pipelined f16/bf16 dots with wgmma (0: mma.sync, the sm_80 path).")
_knob("wgmma_register_b", "TEGULA_WGMMA_REGISTER_B", None, _bool, True,
      "On sm_90a, a f16/bf16 dot whose B is computed in registers (not read from a pipelined "
      "or staged slot) stores B into shared memory and runs on wgmma, as Triton does "
      "(0: such dots take mma.sync).")
_knob("mma_register_operands", "TEGULA_MMA_REGISTER_OPERANDS", None, _bool, True,
      "An mma.sync operand whose warps already hold its fragments (an earlier dot's accumulator "
      "on the same warps) is converted in registers, by shuffles where needed (0: through shared memory).")
_knob("tma", "TEGULA_TMA", None, _bool, True,
      "On sm_90a, copy pipelined tensor-descriptor loads with TMA (0: cp.async through pointers).")
_knob("warp_specialize", "TEGULA_WARP_SPECIALIZE", None, _bool, True,
      "On sm_90a, run a TMA-pipelined loop that asks for it (tl.range(..., warp_specialize=True)) "
      "with a producer warpgroup issuing its copies (0: the hint is ignored, the loop is "
      "pipelined by all warps).")
_knob("wgmma_wait_at_use", "TEGULA_WGMMA_WAIT_AT_USE", None, _bool, True,
      "On sm_90a, a pipelined loop waits for each of its wgmma dots right before the first op "
      "that reads its result, with the dots issued since still in flight (0: right after the dot).")
_knob("tma_release_by_arrival", "TEGULA_TMA_RELEASE_BY_ARRIVAL", None, _bool_or_auto, None,
      "On sm_90a, a loop whose rings are all TMA releases a slot by each warp's arrival on an "
      "mbarrier, which only the issuing thread waits for, instead of a CTA barrier per "
      "iteration, so warpgroups may drift apart (1: every such loop; 0: none; unset or "
      "auto: loops of two or more warpgroups that compute on their dots' results within "
      "the iteration, as attention's softmax does).")
_knob("pipeline_lagged", "TEGULA_PIPELINE_LAGGED", None, _bool, True,
      "A pipelined loop whose body also reads a carried value its copies run ahead with (a "
      "block offset read from a table that also positions the block's mask) carries that "
      "value S-1 iterations behind too (0: such loops are not pipelined).")
_knob("register_offsets", "TEGULA_REGISTER_OFFSETS", None, _bool, True,
      "Integer registers that are a shared part plus a constant (an arange's) keep the "
      "constant outermost through adds, subtracts and products with constants, so a "
      "thread's addresses share one base and LLVM folds the constants into address "
      "immediates (backends/cuda/register_offsets.py).")
_knob("alignment_versions", "TEGULA_ALIGNMENT_VERSIONS", None, _bool, True,
      "A kernel whose loops would access memory in wider vectors if integer arguments with no "
      "known divisibility (Inductor's dynamic sizes, do_not_specialize) were multiples of a "
      "power of two is compiled twice, chosen per launch by a test of those arguments "
      "(backends/cuda/alignment_versions.py; 0: one version).")
_knob("warpgroup_pingpong", "TEGULA_WARPGROUP_PINGPONG", None, _bool, True,
      "On sm_90a, the consumer warpgroups of a warp-specialized loop that computes on its dots' "
      "results within the iteration (attention) take turns issuing their dots, so one's softmax "
      "runs under the other's dots (FlashAttention-3's ping-pong; 0: they issue as they come).")
_knob("cp_async_l1", "TEGULA_CP_ASYNC_L1", None, _bool_or_auto, None,
      "16-byte cp.async copies of a pipelined load go through L1 (cp.async.ca) instead of "
      "around it (.cg) (1: every one; 0: none; unset or auto: those whose rows likely start "
      "in the middle of a 32-byte sector, so neighbouring K blocks share a sector).")
_knob("loop_store_buffers", "TEGULA_LOOP_STORE_BUFFERS", None, _bool, True,
      "On sm_90a, a TMA store in a loop (a persistent kernel's output tiles) writes through a "
      "buffer of its own, and the wait for the copy engine to read it moves to the next "
      "iteration's store (0: each store waits for its copy's read at once).")
_knob("warp_specialize_registers", "TEGULA_WARP_SPECIALIZE_REGISTERS", None, _bool, True,
      "Warp-specialized kernels move registers from the producer to the consumers (setmaxnreg; "
      "0: every thread keeps its share of the register file).")
_knob("occupancy_registers", "TEGULA_OCCUPANCY_REGISTERS", None, _bool, True,
      "When a few registers per thread cost a kernel a CTA per SM, assemble it again with "
      "that register cap and keep the result if it does not spill; when shared memory limits "
      "the CTAs per SM and ptxas used fewer registers than they leave, assemble it again "
      "allowed those (0: ptxas's own choice).")


class _Knobs:
    """Attribute access to the current value of each knob: `knobs.interpret`."""

    def __getattr__(self, attr: str) -> Any:
        try:
            return KNOBS[attr].read()
        except KeyError:
            raise AttributeError(f"tegula.config has no knob '{attr}'") from None

    def __dir__(self):
        return list(KNOBS)


knobs = _Knobs()


# ---------------------------------------------------------------- launch-path reads
# The launch hot path needs the knobs that change what it compiles on every call, and an environment lookup
# of an unset variable costs about a microsecond. Every change to the process
# environment made from Python goes through os.putenv / os.unsetenv, which raise audit
# events; counting them tells when the cached pair may be stale, so the hot path reads
# the environment only after it changed.
_env_generation = 0
_launch_flags_cache: tuple[int, tuple] = (-1, ())


def _count_environment_writes(event: str, _args: tuple) -> None:
    if event in ("os.putenv", "os.unsetenv"):
        global _env_generation
        _env_generation += 1


sys.addaudithook(_count_environment_writes)


LAUNCH_KNOBS = ("interpret", "debug", "checked", "cpu_backend", "default_fp_fusion", "override_arch",
                "f32_default")


def launch_flags() -> tuple:
    """The knobs of `LAUNCH_KNOBS` (`knobs.interpret`, ..., `knobs.override_arch`), part
    of every launch's cache key; re-read only after the environment changed."""
    global _launch_flags_cache
    generation, flags = _launch_flags_cache
    if generation != _env_generation:
        generation = _env_generation
        flags = tuple(KNOBS[name].read() for name in LAUNCH_KNOBS)
        _launch_flags_cache = (generation, flags)
    return flags


_cpu_launch_cache: tuple[int, tuple[int, bool]] = (-1, (0, True))


def cpu_launch_knobs() -> tuple[int, bool]:
    """`(knobs.cpu_threads, knobs.cpu_streaming_stores)`, re-read only after the
    environment changed (every CPU launch asks)."""
    global _cpu_launch_cache
    generation, values = _cpu_launch_cache
    if generation != _env_generation:
        generation = _env_generation
        values = (KNOBS["cpu_threads"].read(), KNOBS["cpu_streaming_stores"].read())
        _cpu_launch_cache = (generation, values)
    return values


def describe() -> str:
    """A table of every knob, its variables and its documentation."""
    rows = []
    for attr, k in KNOBS.items():
        names = k.name + (f" / {k.alias}" if k.alias else "")
        rows.append(f"{attr:18} {names:50} {k.doc}")
    return "\n".join(rows)
