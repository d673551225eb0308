"""A backend (runtime protocol) that compiles with the CUDA backend's lowering and runs
on the host emulator, for host arrays: registered in place of "cpu" by the tests, it
runs whole programs (the examples) through layouts, conversions, reductions, dots...
without a GPU."""
from __future__ import annotations

from typing import Any, Sequence

from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.arch import lowering_capability
from tegula.backends.cuda.compiler import option
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.runtime.args import HostArgs

TARGET = GPUTarget("cpu", "cuda-emulation", 1)


class EmulatedCudaBackend:
    name = "cpu"
    binary_stage = None
    disk_cacheable = False
    launches = 0
    # the capability it lowers for: 80 (mma.sync, cp.async), or 90 (wgmma, TMA) where a
    # test asks for Hopper's paths (the `on` fixture's "cuda-emulated-sm90")
    capability = 80
    # also compile each kernel to PTX + cubin for these capabilities (CI's "every example
    # kernel assembles" check); names of the kernels compiled so are collected
    ptx_capabilities: tuple[int, ...] = ()
    assembled: list[str] = []
    # the emulated kernel `compile` built, for `load` of the same IR (building one is
    # most of an emulated test's time: lowering and the host JIT)
    _built: dict[tuple, tuple[Any, EmulatedKernel]] = {}

    def available(self) -> tuple[bool, str]:
        return True, ""

    def current_target(self, device: int) -> GPUTarget:
        return TARGET

    def compile(self, kernel: Any, options: Any, target: Any, io: Any) -> tuple[dict, dict]:
        from tegula.backends.cuda import compile_kernel
        from tegula.ir.printer import print_ir

        # the emulator's debug mode is checked mode with device asserts
        debug = bool(option(options, "debug", False)) or bool(option(options, "checked", False))
        # the `arch` option lowers for an older capability, as on the GPU
        cap = lowering_capability(option(options, "arch", None), self.capability)
        ek = EmulatedKernel(kernel, int(option(options, "num_warps", 4)), debug, capability=cap,
                            num_stages=int(option(options, "num_stages", 3)))
        EmulatedCudaBackend._built[(id(kernel), ek.num_warps, debug, int(option(options, "num_stages", 3)),
                                    cap)] = (kernel, ek)
        for cap in self.ptx_capabilities:
            asm, _md = compile_kernel(kernel, options, cap)
            assert asm["ptx"] and ("cubin" in asm or cap == 0)
            EmulatedCudaBackend.assembled.append(f"{kernel.name}@sm_{cap}")
        return ({"tgir": print_ir(ek.lowering.kernel, locs=True), "llir": ek.llir},
                {"shared": ek.smem_bytes, "lowered_for": cap})

    def load(self, compiled: Any, device: int):
        md = compiled.metadata
        checked = bool(getattr(md, "debug", False)) or bool(getattr(md, "checked", False))
        cap = int(getattr(md, "lowered_for", None) or self.capability)
        kernel, ek = EmulatedCudaBackend._built.pop((id(compiled.ir), int(md.num_warps), checked,
                                                     int(md.num_stages), cap), (None, None))
        if kernel is not compiled.ir:
            ek = EmulatedKernel(compiled.ir, int(md.num_warps), checked, capability=cap,
                                num_stages=int(md.num_stages))
        names = list(md.arg_names)
        written = [i for i, n in enumerate(names) if n in set(md.written_args)]
        host = HostArgs(md.name, names, written)
        indices = tuple(md.arg_indices)

        def launch(grid: tuple, values: Sequence[Any]) -> None:
            if min(grid) <= 0:
                return
            args, writebacks = host.convert([values[i] for i in indices])
            ek.run(grid, args)
            EmulatedCudaBackend.launches += 1
            for wb in writebacks:
                wb()

        return launch
