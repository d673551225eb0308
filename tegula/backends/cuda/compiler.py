"""The CUDA backend's compile entry point: tile IR → the GPU stage (`tgir`) → LLVM IR
(`llir`) → PTX (`ptx`) → cubin (`cubin`, when ptxas exists), plus the metadata the
launcher needs (name, warps, dynamic shared memory, registers, spills, hidden checked-
mode parameters and the source sites they report).

`to_tgir` runs the registered pass pipeline `"cuda_tgir"` through the pass manager
(verified between passes when `TEGULA_VERIFY_IR` or debug is on, timed, named in
errors): tensor-descriptor accesses as pointer code where TMA does not take them
(`tma.tma_loads`), software pipelining (TMA rings on sm_90a), the leftover descriptor
loads as pointer code, layout assignment written into the types (`encode_layouts`),
shared-memory allocation and barrier placement (`shared_memory`).
Its output is printed as `asm["tgir"]`, parseable IR; the lowering
reads nothing but that IR (`encode_layouts.plan_from_types`).

Each stage's text goes through `emit(stage, content) -> content` (the runtime's
`StageIO.emit`: dumps, and returns an override when one exists); an overridden `tgir`,
`llir` or `ptx` is what the later stages are built from.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ...config import knobs
from ...errors import CompilationError
from ...ir.clone import clone_kernel
from ...ir.core import Instr, Kernel
from ...ir.ops import Op
from ...ir.parser import parse_ir
from ...ir.printer import print_ir
from ...ir.types import PointerType, element_of
from ...ir.verifier import verify
from ...passes.block_pointers_to_pointers import lower_block_pointers
from ...passes.descriptors_to_pointers import lower_descriptors
from ...passes.manager import PassContext, register_pass, run_pipeline
from ...passes.pipelines import register_pipeline
from . import codegen, occupancy, ptxas
from .alignment_versions import alignment_versions
from .arch import lowering_capability
from .assign_layouts import assign_layouts
from .encode_layouts import encode_layouts, plan_from_types
from .layout_plan import LayoutPlan
from .lower_kernel import KernelLowering
from .pipeline_loops import pipeline_loops
from .pipeline_plan import shared_capacity
from .register_pressure import loop_carried_registers
from .shared_memory import allocate_shared_memory, insert_barriers, shared_bytes
from .split_tf32x3 import split_tf32x3_dots
from .stage_operands import stage_invariant_operands
from .stage_registers import stage_register_operands
from .store_buffers import buffer_loop_stores
from .tma import tma_enabled, tma_loads, tma_stores
from .warp_partitions import maxnreg_of
from .warpgroup_turns import drop_blocked_turns

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


@dataclass(frozen=True)
class TgirOptions:
    """What the `cuda_tgir` passes read from their `PassContext.options`."""

    num_warps: int
    num_stages: int
    capability: int
    checked: bool
    # a persistent kernel's staged operands copied one tile ahead or under its loops
    # (`tile_prefetch`)
    prefetch_tiles: bool = True
    # a loop's TMA stores through buffers of their own (`store_buffers`)
    buffer_stores: bool = True
    # register tiles read by several ops staged in buffers of their own (`stage_registers`)
    stage_registers: bool = True


def _lower_block_pointers(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Block pointers as pointer code (then cleaned up as `tir_opt` does): their parts
    carried by the loops, their accesses masked loads and stores, as Triton's
    RewriteTensorPointer does before its NVIDIA passes."""
    return lower_block_pointers(kernel, PassContext(verify=ctx.verify, timings=ctx.timings), copy=False)


def _lower_descriptors(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Tensor-descriptor accesses as pointer code (then cleaned up as `tir_opt` does),
    but for the loads TMA will copy on sm_90a (`tma.tma_loads`) and the stores it
    writes (`tma.tma_stores`)."""
    o: TgirOptions = ctx.options
    keep: set[Instr] = set()
    if tma_enabled(o.capability, o.checked):
        keep = tma_loads(kernel, o.num_warps, o.capability) | tma_stores(kernel)
    return lower_descriptors(kernel, keep.__contains__, PassContext(verify=ctx.verify, timings=ctx.timings),
                             copy=False)


def _leftover_descriptors(kernel: Kernel, ctx: PassContext) -> Kernel:
    """The descriptor loads kept for TMA that the pipeliner did not take (their loop
    did not fit it) as pointer code after all."""
    if not any(ins.op is Op.DESCRIPTOR_LOAD for ins in kernel.walk()):
        return kernel
    stores = {ins for ins in kernel.walk() if ins.op is Op.DESCRIPTOR_STORE}  # kept for TMA before
    return lower_descriptors(kernel, stores.__contains__, PassContext(verify=ctx.verify, timings=ctx.timings),
                             copy=False)


def _alignment_versions(kernel: Kernel, ctx: PassContext) -> Kernel:
    """The kernel twice, on whether promised-only integer arguments are multiples of the
    powers of two its loops' vectors want (`alignment_versions`)."""
    o: TgirOptions = ctx.options
    if not knobs.alignment_versions:
        return kernel
    return alignment_versions(kernel, o.num_warps, o.checked)


def _split_tf32x3(kernel: Kernel, ctx: PassContext) -> Kernel:
    """tf32x3 dots as three tf32 tensor-core dots (`split_tf32x3`)."""
    return split_tf32x3_dots(kernel, ctx.options.capability)


def _pipeline_loops(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Software pipelining of the loops that feed dots, and of dot-free loops given
    their own num_stages (not in checked mode, whose checked accesses are plain loads)."""
    o: TgirOptions = ctx.options
    if not o.checked:  # pipeline_loops picks the loops (dots inside, or their own num_stages)
        pipeline_loops(kernel, o.num_stages, o.num_warps, o.capability)
    return kernel


def _stage_operands(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Loop-invariant wgmma operands staged once in shared memory (sm_90a; B operands,
    and A operands when registers are short): see `stage_operands`."""
    o: TgirOptions = ctx.options
    if not o.checked:
        stage_invariant_operands(kernel, o.num_warps, o.capability, o.prefetch_tiles)
    return kernel


def _buffer_stores(kernel: Kernel, ctx: PassContext) -> Kernel:
    """A loop's TMA stores through buffers of their own, the wait for the copy engine's
    read an iteration later: see `store_buffers`."""
    o: TgirOptions = ctx.options
    if o.buffer_stores and knobs.loop_store_buffers and not o.checked:
        buffer_loop_stores(kernel)
    return kernel


def _encode_layouts(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Every tile value's layout chosen (`assign_layouts`) and written into its type,
    conversions made explicit."""
    o: TgirOptions = ctx.options
    return encode_layouts(kernel, assign_layouts(kernel, o.num_warps, capability=o.capability))


def _stage_registers(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Register tiles several wgmma dots read as B, or that one reads and a conversion
    moves through shared memory, written once into a buffer of their own (sm_90a): see
    `stage_registers`."""
    o: TgirOptions = ctx.options
    if not o.stage_registers:
        return kernel
    return stage_register_operands(kernel, o.num_warps, o.capability)


def _allocate_shared_memory(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Byte ranges of shared buffers and per-op scratch, on the ops (`smem(...)`)."""
    return allocate_shared_memory(kernel, ctx.options.num_warps, ctx.options.capability)


def _insert_barriers(kernel: Kernel, ctx: PassContext) -> Kernel:
    """CTA barriers between shared-memory accesses of different ops; then no warpgroup
    turn may hold one inside (`warpgroup_turns.drop_blocked_turns`)."""
    insert_barriers(kernel)
    drop_blocked_turns(kernel)
    return kernel


register_pass("cuda.split_tf32x3", _split_tf32x3)
register_pass("cuda.lower_block_pointers", _lower_block_pointers)
register_pass("cuda.lower_descriptors", _lower_descriptors)
register_pass("cuda.alignment_versions", _alignment_versions)
register_pass("cuda.pipeline_loops", _pipeline_loops)
register_pass("cuda.leftover_descriptors", _leftover_descriptors)
register_pass("cuda.stage_operands", _stage_operands)
register_pass("cuda.buffer_stores", _buffer_stores)
register_pass("cuda.encode_layouts", _encode_layouts)
register_pass("cuda.stage_registers", _stage_registers)
register_pass("cuda.allocate_shared_memory", _allocate_shared_memory)
register_pass("cuda.insert_barriers", _insert_barriers)
# split_tf32x3 first, so every later pass sees ordinary tf32 dots; flatten_loops before
# the pipeliner: the flat loop of a `tl.range(..., flatten=True)` nest is what
# pipeline_loops then pipelines across the outer iterations; alignment_versions once
# block pointers and descriptors are pointer code (their accesses widen too, and TMA's
# choice reads the arguments as they are), before the pipeliner plans each version
register_pipeline("cuda_tgir", ["cuda.split_tf32x3", "flatten_loops", "cuda.lower_block_pointers",
                                "cuda.lower_descriptors", "cuda.alignment_versions", "cuda.pipeline_loops",
                                "cuda.leftover_descriptors", "cuda.stage_operands", "cuda.buffer_stores",
                                "cuda.encode_layouts", "cuda.stage_registers", "cuda.allocate_shared_memory",
                                "cuda.insert_barriers"])


def to_tgir(kernel: Kernel, num_warps: int, num_stages: int, capability: int,
            checked: bool, timings: Optional[dict[str, float]] = None,
            prefetch_tiles: bool = True, buffer_stores: bool = True,
            stage_registers: bool = True) -> tuple[Kernel, LayoutPlan]:
    """The GPU stage of `kernel` (a copy: the caller's kernel is left as it is) and the
    lowering's view of it. `checked`: checked mode, whose bounds-checked accesses are
    plain loads, so nothing is pipelined. `prefetch_tiles`: see `tile_prefetch`;
    `buffer_stores`: see `store_buffers`; `stage_registers`: see `stage_registers`."""
    options = TgirOptions(num_warps, num_stages, capability, checked, prefetch_tiles, buffer_stores,
                          stage_registers)
    ctx = PassContext(options=options, stage="tgir", verify=bool(knobs.verify_ir) or checked)
    staged = run_pipeline(clone_kernel(kernel), "cuda_tgir", ctx)
    if timings is not None:
        timings.update(ctx.timings)
    return staged, plan_from_types(staged, num_warps)


def read_tgir(text: str, num_warps: int) -> tuple[Kernel, LayoutPlan]:
    """A `tgir` text (an override of `asm["tgir"]`) as the kernel the lowering reads."""
    kernel = parse_ir(text)
    verify(kernel, stage="tgir")
    return kernel, plan_from_types(kernel, num_warps)


def compile_kernel(kernel: Kernel, options: Any = None, target: Any = None,
                   emit: Optional[Emit] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compile `kernel` for `target`. `options` carries `num_warps`, `num_stages`,
    `debug` (device asserts), `checked` (checked mode), `maxnreg`, `enable_fp_fusion`
    (attributes or dict keys). Returns
    `(asm, metadata)`; `asm` has `tgir`, `llir`, `ptx` and, when ptxas is found,
    `cubin` (bytes)."""
    t0 = time.perf_counter()
    emit = emit or (lambda stage, content: content)
    # `cap` is the device's (PTX target, cubin, shared-memory capacity); `arch` the
    # capability the kernel is lowered for (the `arch` option, else the device's)
    cap = capability_of(target)
    arch_cap = lowering_capability(option(options, "arch", None), cap)
    num_warps = int(option(options, "num_warps", 4))
    debug = bool(option(options, "debug", False)) or knobs.debug
    # checked mode (tegula's, not Triton's debug): bounds-checked accesses, errors
    # reported after the launch
    checked = bool(option(options, "checked", False)) or knobs.checked
    maxnreg = option(options, "maxnreg", None)
    num_stages = int(option(options, "num_stages", 3))
    fp_fusion = bool(option(options, "enable_fp_fusion", True))
    stages = num_stages
    # buffers that share their bytes with nothing, given up in this order before stages
    # (registers staged for several readers go back to each dot's passing scratch)
    extras = {"buffer_stores": True, "prefetch_tiles": True, "stage_registers": True}
    pass_timings: dict[str, float] = {}
    while True:
        kernel_tgir, plan = to_tgir(kernel, num_warps, stages, arch_cap, checked, pass_timings, **extras)
        # Rings plus the scratch of the ops inside their loops may exceed the GPU's
        # shared memory; a shallower pipeline then still runs (no cliff into an
        # out-of-resources launch for a config that worked unpipelined). A loop's store
        # buffers, then tile-ahead copies' buffers go first (a kernel without them
        # compiles once more, the same).
        buffered = any(ins.op is Op.LOCAL_ALLOC for ins in kernel_tgir.walk())
        if not buffered or shared_bytes(kernel_tgir) <= shared_capacity(cap):
            break
        dropped = next((name for name, on in extras.items() if on), None)
        if dropped is not None:
            extras[dropped] = False
            continue
        if stages <= 1:
            break
        stages -= 1
    printed = print_ir(kernel_tgir, locs=True)
    asm: dict[str, Any] = {"tgir": emit("tgir", printed)}
    if asm["tgir"] != printed:
        # an override of the GPU stage: compile what the text says
        kernel_tgir, plan = read_tgir(asm["tgir"], num_warps)

    def lower(rematerialized_descriptors: bool) -> tuple[KernelLowering, str, str]:
        """The kernel's lowering, its optimized LLVM IR and PTX."""
        lw = KernelLowering(kernel_tgir, plan, arch_cap, debug=debug, checked=checked, fp_fusion=fp_fusion,
                            rematerialized_descriptors=rematerialized_descriptors)
        module = lw.build()
        codegen.add_module_flags(module)
        llir = codegen.optimize(str(module), arch_cap, kernel_tgir.name)
        return lw, llir, codegen.emit_ptx(llir, cap, lw.dev.ptx_isa)

    lw, llir, ptx_text = lower(False)
    kernel = kernel_tgir
    asm["llir"] = emit("llir", llir)
    overridden = asm["llir"] != llir  # an override of a stage: compiled as given, no retry
    if overridden:
        ptx_text = codegen.emit_ptx(asm["llir"], cap, lw.dev.ptx_isa)
    # a warp-specialized kernel re-sizing its partitions' registers starts every thread
    # with its share of the register file (setmaxnreg moves registers within that)
    maxnreg = maxnreg_of(kernel_tgir, num_warps) or maxnreg
    if maxnreg:  # in the PTX itself, so a driver JIT-compiling it honours it too
        ptx_text = ptxas.with_register_cap(ptx_text, int(maxnreg))
    asm["ptx"] = emit("ptx", ptx_text)
    overridden = overridden or asm["ptx"] != ptx_text
    arch = codegen.ptx_arch(cap)
    metadata: dict[str, Any] = {
        "name": kernel.name, "num_warps": lw.total_warps,  # with a producer partition's warps
        "num_stages": num_stages, "num_ctas": 1,
        "shared": shared_bytes(kernel_tgir), "arch": arch, "capability": cap,
        "lowered_for": arch_cap,  # the `arch` option's capability, else the device's
        "arg_types": [str(a.type) for a in kernel.args],
        "pointer_args": [i for i, a in enumerate(kernel.args) if isinstance(element_of(a.type), PointerType)],
        "debug": debug, "checked": lw.checked is not None,
        "checked_sites": lw.checked.site_records() if lw.checked else [],
        "n_regs": None, "n_spills": None, "ptxas": None,
        # TMA descriptors: the launcher encodes one tensor map each (parameters after the others)
        "tensormaps": [spec.to_json() for _make, spec in lw.tensormap_specs],
    }
    exe = ptxas.find_ptxas()
    if exe is not None:
        threads = 32 * lw.total_warps
        # the CTA's whole register share from the start for a kernel bound to spill (no
        # cap of its own, nor a stage override); when it spills nothing after all, the
        # guess was wrong and ptxas runs again as if none had been made
        share = None if maxnreg or overridden else _share_of_a_spilling_kernel(kernel_tgir, threads)
        cubin, info, share = _assemble_first(asm, arch, exe, share, metadata)
        register_cap = maxnreg or share  # the later runs keep the cap the first one had
        if lw.staged_descriptors and info["spill_loads"] > info["n_spills"] and not overridden:
            # Spilled values reloaded more than stored (loop invariants spilled once and
            # reloaded every iteration), with descriptors of staged operands, which are
            # such invariants: try them rematerialized (`lower_wgmma.base_descriptor`),
            # keep whichever spills fewer bytes. (Tutorial 06's D128 backward: 2384
            # bytes stored, 2660 loaded, 2148 each after; its forward's spilling configs
            # store more than they load, and the retry, 2 s each, did not help them.)
            lw2, llir2, ptx2 = lower(True)
            if register_cap:
                ptx2 = ptxas.with_register_cap(ptx2, int(register_cap))
            cubin2, info2, _log = ptxas.assemble(ptx2, arch, ptxas=exe)
            if info2["n_spills"] + info2["spill_loads"] < info["n_spills"] + info["spill_loads"]:
                lw, cubin, info = lw2, cubin2, info2
                asm["llir"], asm["ptx"] = emit("llir", llir2), emit("ptx", ptx2)
                metadata["rematerialized_descriptors"] = True
        if register_cap is None and info["n_spills"]:
            cubin, info = _whole_register_share(asm, arch, exe, cubin, info, threads, metadata)
        if register_cap is None and knobs.occupancy_registers and not info["n_spills"]:
            cubin, info = _shared_memory_budget(asm, arch, exe, cubin, info, threads,
                                                shared_bytes(kernel_tgir), cap, metadata)
        if register_cap is None and knobs.occupancy_registers:
            cubin, info = _occupancy_cap(asm, arch, exe, cubin, info, threads,
                                         shared_bytes(kernel_tgir), cap, metadata)
        asm["cubin"] = emit("cubin", cubin)
        metadata.update(info)
        metadata["shared"] = shared_bytes(kernel_tgir) + info["static_shared"]
        metadata["ptxas"] = ptxas.ptxas_version(exe)
    metadata["pass_timings"] = pass_timings
    metadata["compile_time"] = time.perf_counter() - t0
    return asm, metadata


def _share_of_a_spilling_kernel(kernel: Kernel, threads: int) -> Optional[int]:
    """The CTA's whole register share when the registers its loops carry exceed it
    (`register_pressure`): it spills however ptxas allocates, and ptxas left alone may
    aim at an occupancy and spill far more (so that `_whole_register_share` would
    assemble it again); None otherwise."""
    share = occupancy.register_file_share(threads)
    return share if loop_carried_registers(kernel) > share else None


def _assemble_first(asm: dict, arch: str, exe: str, share: Optional[int],
                    metadata: dict) -> tuple[bytes, dict, Optional[int]]:
    """ptxas on `asm["ptx"]`, given `.maxnreg share` when `share` is set; returns the
    cubin, its info and the cap it was kept with. The capped result is kept (its PTX in
    `asm`, `metadata["spill_maxnreg"]` set, as `_whole_register_share` leaves them) only
    if it spills: a kernel that fits after all is assembled again uncapped, as it would
    have been without the guess, which then cost only time."""
    if share is not None:
        capped_ptx = ptxas.with_register_cap(asm["ptx"], share)
        try:
            cubin, info, _log = ptxas.assemble(capped_ptx, arch, ptxas=exe)
        except CompilationError:  # "Insufficient registers": the uncapped run decides
            info = None
        if info is not None and info["n_spills"]:
            asm["ptx"] = capped_ptx
            metadata["spill_maxnreg"] = share
            return cubin, info, share
    cubin, info, _log = ptxas.assemble(asm["ptx"], arch, ptxas=exe)
    return cubin, info, None


def _with_register_cap(asm: dict, arch: str, exe: str, cubin: bytes, info: dict, regs: int,
                       better: Callable[[dict], bool], why: str, metadata: dict) -> tuple[bytes, dict]:
    """ptxas again with `.maxnreg regs`; the result (and its PTX, which then carries the
    directive) replaces the first when `better(its info)`, and `metadata[why]` says why
    the PTX has a cap. ptxas refusing the cap ("Insufficient registers": an instruction
    such as a wgmma with its accumulators needs more) keeps the first."""
    capped_ptx = ptxas.with_register_cap(asm["ptx"], regs)
    try:
        capped, capped_info, _log = ptxas.assemble(capped_ptx, arch, ptxas=exe)
    except CompilationError:
        return cubin, info
    if not better(capped_info):
        return cubin, info
    asm["ptx"] = capped_ptx
    metadata[why] = regs
    return capped, capped_info


def _whole_register_share(asm: dict, arch: str, exe: str, cubin: bytes, info: dict, threads: int,
                          metadata: dict) -> tuple[bytes, dict]:
    """ptxas again, allowed the CTA's whole share of the register file, when it spilled
    using less (it may aim at two CTAs per SM where the kernel needs the registers); kept
    if it spills fewer bytes."""
    share = occupancy.register_file_share(threads)
    if info["n_regs"] >= share:
        return cubin, info
    spilled = info["n_spills"] + info["spill_loads"]
    return _with_register_cap(asm, arch, exe, cubin, info, share,
                              lambda new: new["n_spills"] + new["spill_loads"] < spilled, "spill_maxnreg", metadata)


def _shared_memory_budget(asm: dict, arch: str, exe: str, cubin: bytes, info: dict, threads: int,
                          shared: int, cap: int, metadata: dict) -> tuple[bytes, dict]:
    """ptxas again, allowed the registers of the CTAs shared memory lets reside, when it
    used fewer (`occupancy.shared_memory_budget`: it aimed at CTAs that never come); kept
    if it uses more registers (else ptxas had what it wanted), spills nothing and uses no
    more stack."""
    budget = occupancy.shared_memory_budget(info["n_regs"], threads, shared + info["static_shared"], cap)
    if budget is None:
        return cubin, info
    return _with_register_cap(asm, arch, exe, cubin, info, budget,
                              lambda new: not new["n_spills"] and new["stack"] <= info["stack"]
                              and new["n_regs"] > info["n_regs"], "shared_memory_maxnreg", metadata)


def _occupancy_cap(asm: dict, arch: str, exe: str, cubin: bytes, info: dict, threads: int, shared: int,
                   cap: int, metadata: dict) -> tuple[bytes, dict]:
    """ptxas again with a register cap when a few registers cost a CTA per SM
    (`occupancy.register_target`); kept only if it spills nothing."""
    target = occupancy.register_target(info["n_regs"], threads, shared + info["static_shared"], cap)
    if target is None or info["n_spills"]:
        return cubin, info
    return _with_register_cap(asm, arch, exe, cubin, info, target,
                              lambda new: not new["n_spills"] and new["stack"] <= info["stack"],
                              "occupancy_maxnreg", metadata)
