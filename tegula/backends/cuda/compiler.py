"""The CUDA backend's compile entry point: tile IR → layouts (`tgir`) → LLVM IR
(`llir`) → PTX (`ptx`) → cubin (`cubin`, when ptxas exists), plus the metadata the
launcher needs (name, warps, dynamic shared memory, registers, spills, hidden checked-
mode parameters and the source sites they report).

Each stage's text goes through `emit(stage, content) -> content` (the runtime's
`StageIO.emit`: dumps, and returns an override when one exists); an overridden `llir`
or `ptx` is what the later stages are built from.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

from ...config import knobs
from ...ir.clone import clone_kernel
from ...ir.core import Kernel
from ...ir.ops import Op
from ...ir.types import PointerType, element_of
from ...ir.verifier import verify
from . import codegen, ptxas
from .assign_layouts import LayoutPlan, assign_layouts
from .lower_kernel import KernelLowering
from .pipeline_loops import pipeline_loops, shared_capacity
from .tgir import format_tgir

Emit = Callable[[str, Any], Any]


def capability_of(target: Any) -> int:
    """Compute capability as an int (90 for sm_90) from a GPUTarget, an int or a str."""
    if target is None:
        return 90
    arch = getattr(target, "arch", target)
    if isinstance(arch, str):
        arch = arch.lower().removeprefix("sm_").rstrip("a")
    return int(arch)


def option(options: Any, name: str, default: Any) -> Any:
    if options is None:
        return default
    if isinstance(options, dict):
        return options.get(name, default)
    return getattr(options, name, default)


def to_tgir(kernel: Kernel, num_warps: int, num_stages: int, capability: int,
            checked: bool) -> tuple[Kernel, LayoutPlan]:
    """The GPU stage: loops pipelined (a copy of `kernel` when any is; not in checked
    mode, whose checked accesses are plain loads), then every tile value's layout."""
    if not checked and any(ins.op is Op.DOT for ins in kernel.walk()):
        # the pipeliner rewrites loops in place: work on a copy of the caller's kernel
        staged = clone_kernel(kernel)
        if pipeline_loops(staged, num_stages, num_warps, capability):
            kernel = staged
            if knobs.verify_ir:
                verify(kernel, stage="tgir")
    return kernel, assign_layouts(kernel, num_warps, capability=capability)


def compile_kernel(kernel: Kernel, options: Any = None, target: Any = None,
                   emit: Optional[Emit] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compile `kernel` for `target`. `options` carries `num_warps`, `num_stages`,
    `debug` (device asserts), `checked` (checked mode), `maxnreg`, `enable_fp_fusion`
    (attributes or dict keys). Returns
    `(asm, metadata)`; `asm` has `tgir`, `llir`, `ptx` and, when ptxas is found,
    `cubin` (bytes)."""
    t0 = time.perf_counter()
    emit = emit or (lambda stage, content: content)
    cap = capability_of(target)
    num_warps = int(option(options, "num_warps", 4))
    debug = bool(option(options, "debug", False)) or knobs.debug
    # checked mode (tegula's, not Triton's debug): bounds-checked accesses, errors
    # reported after the launch
    checked = bool(option(options, "checked", False)) or knobs.checked
    maxnreg = option(options, "maxnreg", None)
    num_stages = int(option(options, "num_stages", 3))
    fp_fusion = bool(option(options, "enable_fp_fusion", True))
    source = kernel
    stages = num_stages
    while True:
        kernel, plan = to_tgir(source, num_warps, stages, cap, checked)
        lw = KernelLowering(kernel, plan, cap, debug=debug, checked=checked, fp_fusion=fp_fusion)
        module = lw.build()
        # Rings plus the scratch the lowering needed inside their loops may exceed the
        # GPU's shared memory; a shallower pipeline then still runs (no cliff into an
        # out-of-resources launch for a config that worked unpipelined).
        if kernel is source or stages <= 1 or lw.smem_bytes <= shared_capacity(cap):
            break
        stages -= 1
    asm: dict[str, Any] = {"tgir": emit("tgir", format_tgir(kernel, plan))}
    codegen.add_module_flags(module)
    asm["llir"] = emit("llir", codegen.optimize(str(module), cap, kernel.name))
    asm["ptx"] = emit("ptx", codegen.emit_ptx(asm["llir"], cap))
    arch = codegen.ptx_arch(cap)
    metadata: dict[str, Any] = {
        "name": kernel.name, "num_warps": num_warps,
        "num_stages": num_stages, "num_ctas": 1,
        "shared": lw.smem_bytes, "arch": arch, "capability": cap,
        "arg_types": [str(a.type) for a in kernel.args],
        "pointer_args": [i for i, a in enumerate(kernel.args) if isinstance(element_of(a.type), PointerType)],
        "debug": debug, "checked": lw.checked is not None,
        "checked_sites": lw.checked.site_records() if lw.checked else [],
        "n_regs": None, "n_spills": None, "ptxas": None,
    }
    exe = ptxas.find_ptxas()
    if exe is not None:
        cubin, info, _log = ptxas.assemble(asm["ptx"], arch, maxnreg=maxnreg, ptxas=exe)
        asm["cubin"] = emit("cubin", cubin)
        metadata.update(info)
        metadata["shared"] = lw.smem_bytes + info["static_shared"]
        metadata["ptxas"] = ptxas.ptxas_version(exe)
    metadata["compile_time"] = time.perf_counter() - t0
    return asm, metadata
