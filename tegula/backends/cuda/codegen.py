"""LLVM module → optimized LLVM IR and PTX text, with llvmlite's NVPTX backend.

libdevice (`libdevice.10.bc`) is linked only when the module calls an `__nv_*`
function; after linking, every function but the kernel is made internal so LLVM's O3
pipeline inlines what is used and drops the rest (emitting all of libdevice would cost
~0.4 s and ~800 KB of PTX). `nvvm-reflect-ftz = 0` keeps denormals (libdevice asks
through `__nvvm_reflect`, which the NVPTX pipeline folds).
"""
from __future__ import annotations

import functools
import glob
import os
import threading
from typing import Optional

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ...config import knobs
from ...errors import CompilationError

_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # 32-bit shared/local/const pointers (as nvcc and Triton use): shared-memory
    # addressing in 32-bit registers instead of 64-bit generic arithmetic
    llvm.set_option("", "--nvptx-short-ptr")


def ptx_arch(capability: int) -> str:
    """`sm_90a` for Hopper (wgmma/setmaxnreg need the `a` target), `sm_XY` otherwise."""
    return f"sm_{capability}a" if capability in (90, 100, 101, 120) else f"sm_{capability}"


def ptx_version(capability: int) -> int:
    if capability >= 120:
        return 87
    if capability >= 100:
        return 86
    return 80


@functools.lru_cache(maxsize=None)
def target_machine(capability: int, ptx_isa: int = 0) -> llvm.TargetMachine:
    """The NVPTX target machine for `capability`, emitting PTX ISA `ptx_isa` (x10) where
    that is above the capability's default: a kernel whose inline asm needs a newer ISA
    (an fp8 `mma.sync`: 8.4) says so; the others keep the oldest version that has what
    they use, so a driver JIT-compiling their PTX (no ptxas here) may be older."""
    _init()
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    return target.create_target_machine(cpu=ptx_arch(capability),
                                        features=f"+ptx{max(ptx_version(capability), ptx_isa)}", opt=3)


def find_libdevice() -> Optional[str]:
    candidates = []
    if knobs.libdevice:
        candidates.append(knobs.libdevice)
    for home in (knobs.cuda_home, "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "nvvm", "libdevice", "libdevice.10.bc"))
    try:  # the nvidia-cuda-nvcc wheel
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]
        for root in getattr(wheel, "__path__", []):
            candidates += glob.glob(os.path.join(root, "nvvm", "libdevice", "libdevice*.bc"))
    except ImportError:
        pass
    return next((p for p in candidates if p and os.path.isfile(p)), None)


@functools.lru_cache(maxsize=2)
def _libdevice_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def add_module_flags(module: ir.Module) -> None:
    i32 = ir.IntType(32)
    flag = [ir.Constant(i32, 4), "nvvm-reflect-ftz", ir.Constant(i32, 0)]
    module.add_named_metadata("llvm.module.flags", flag)


def optimize(text: str, capability: int, kernel_name: str) -> str:
    """The LLVM module `text`, verified, linked with libdevice when it calls it, and
    optimized at O3 for the target (text of the result)."""
    tm = target_machine(capability)
    with _lock:  # one LLVM context per process: keep its users apart
        mod = llvm.parse_assembly(text)
        mod.verify()
        if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
            path = find_libdevice()
            if path is None:
                raise CompilationError("libdevice.10.bc not found: set TEGULA_LIBDEVICE_PATH or CUDA_HOME")
            mod.link_in(llvm.parse_bitcode(_libdevice_bytes(path)))
        for f in mod.functions:
            if not f.is_declaration and f.name != kernel_name:
                f.linkage = "internal"
        mod.triple = "nvptx64-nvidia-cuda"
        mod.data_layout = str(tm.target_data)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return str(mod)


def emit_ptx(text: str, capability: int, ptx_isa: int = 0) -> str:
    """PTX of an optimized LLVM module (`.version` at least `ptx_isa`, see target_machine)."""
    tm = target_machine(capability, ptx_isa)
    with _lock:
        mod = llvm.parse_assembly(text)
        mod.verify()
        return tm.emit_assembly(mod)
