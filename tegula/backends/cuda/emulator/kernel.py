"""`EmulatedKernel`: a tile-IR kernel lowered by the CUDA backend for a capability, with
`HostDevice` as its device, JIT-compiled for the host, and run grid by grid through
`CtaRunner`; plus how a launch's arguments become the entry's C arguments (16-bit float
scalars as their bit patterns, checked mode's hidden error buffer and buffer sizes).

`lower_for_host` is the one place the emulator calls the CUDA lowering.
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence

import llvmlite.ir as ir
import numpy as np

from ....ir.core import Kernel
from ....ir.types import PointerType, element_of
from ...llvm import host_jit
from ..checked import ERROR_WORDS
from ..compiler import to_tgir
from ..launcher import narrow_float_bits, raise_recorded_error
from ..layout_plan import LayoutPlan
from ..lower_kernel import KernelLowering
from ..shared_memory import shared_bytes
from ..tensormaps import encode_args
from ..tma import TensorMapSpec, evaluate
from . import faults
from .cta import CtaRunner
from .host_device import HostDevice
from .tma_models import pack_tensormap

# what the emulator lowers for: sm_80; sm_89 adds fp8 conversions and fp8 mma.sync; sm_90a
# wgmma and TMA
CAPABILITIES = (80, 89, 90)


def lower_for_host(kernel: Kernel, num_warps: int, capability: int, debug: bool,
                   num_stages: int = 3) -> tuple[LayoutPlan, KernelLowering, ir.Module]:
    """The CUDA backend's lowering of `kernel` for `capability`, exactly as the GPU
    compile does it (`compiler.compile_kernel`: `to_tgir`, then the lowering), with
    `HostDevice` as its device."""
    kernel, plan = to_tgir(kernel, num_warps, num_stages, capability, debug)
    lw = KernelLowering(kernel, plan, capability, debug=debug, checked=debug, device=HostDevice())
    return plan, lw, lw.build()


def target_machine() -> object:
    """The LLVM target machine the emulator compiles for: the process's CPU, generic,
    with f16c, so half conversions are inline instructions rather than runtime calls
    the JIT cannot resolve."""
    return host_jit.target_machine(opt=2, native=False, features="+f16c")


def _scalar_value(t: Any, v: Any) -> Any:
    """A launch's scalar argument as the ctypes slot of its parameter takes it."""
    e = element_of(t)
    if e.is_float and e.bits < 32:
        return narrow_float_bits(float(v), e.name)
    return float(v) if e.is_float else int(v)


class EmulatedKernel:
    """A kernel compiled for the host emulation; call `run(grid, args)`."""

    def __init__(self, kernel: Kernel, num_warps: int = 4, debug: bool = False, capability: int = 80,
                 num_stages: int = 3):
        if capability not in CAPABILITIES:
            known = ", ".join(map(str, CAPABILITIES[:-1])) + f" or {CAPABILITIES[-1]}"
            raise ValueError(f"the emulator lowers for capability {known}, not {capability}")
        host_jit.init_native()
        self.kernel = kernel
        self.num_warps = num_warps
        self.capability = capability
        self.plan, lw, module = lower_for_host(kernel, num_warps, capability, debug, num_stages)
        entry = host_jit.host_entry(module, lw.fn)
        self.lowering = lw
        self.smem_bytes = shared_bytes(lw.kernel)
        self.checked = lw.checked
        self.llir = str(module)
        self.engine = host_jit.jit(self.llir, target_machine(), 2)
        argtypes = [host_jit.ctype(a.type) for a in kernel.args]
        if self.checked:
            argtypes += [ctypes.c_void_p] + [ctypes.c_int64] * len(self.checked.pointer_args)
        self.tensormaps = [spec for _make, spec in lw.tensormap_specs]
        argtypes += [ctypes.c_void_p] * len(self.tensormaps)  # the host model's tensor maps
        argtypes += [ctypes.c_int32, ctypes.c_void_p]  # HostDevice.extra_params
        fn = ctypes.CFUNCTYPE(None, *argtypes)(self.engine.get_function_address(entry))
        self.runner = CtaRunner(fn, lw.total_warps, self.smem_bytes)  # a producer partition's warps too

    def run(self, grid: Sequence[int], args: Sequence[Any], timeout: float = 120.0) -> Optional[np.ndarray]:
        """Run on numpy arrays (pointer arguments) and Python scalars; returns the
        checked-mode error record (int64[ERROR_WORDS]) when checked, else None."""
        values: list[Any] = []
        for a, v in zip(self.kernel.args, args):
            if isinstance(element_of(a.type), PointerType):
                values.append(v.ctypes.data)
            else:
                values.append(_scalar_value(a.type, v))
        errors = None
        if self.checked:
            errors = np.zeros(ERROR_WORDS, np.int64)
            values.append(errors.ctypes.data)
            for i in self.checked.pointer_args:
                values.append(int(args[i].nbytes))
        maps = [self._tensormap(spec, values) for spec in self.tensormaps]  # kept alive over the run
        values += [m.ctypes.data for m in maps]
        faults.clear()
        self.runner.run(grid, values, timeout)
        faults.raise_recorded(self.kernel.name)
        if errors is not None:
            raise_recorded_error(errors, self.checked.site_records(), self.kernel.name)
        return errors


    def _tensormap(self, spec: "TensorMapSpec", values: list[Any]) -> np.ndarray:
        """A descriptor's tensor map for this launch, from the same numbers the GPU
        launcher gives the driver."""
        def value(src: Sequence[Any]) -> int:
            return evaluate(src, lambda i: values[i])
        dims, strides = encode_args(spec, value(spec.base), [value(s) for s in spec.shape],
                                    [value(s) for s in spec.strides], self.kernel.name)
        return pack_tensormap(spec, value(spec.base), dims, strides)


def run(kernel: Kernel, grid: Sequence[int], args: Sequence[Any], num_warps: int = 4,
        debug: bool = False, capability: int = 80, num_stages: int = 3) -> Optional[np.ndarray]:
    return EmulatedKernel(kernel, num_warps, debug, capability, num_stages).run(grid, args)
