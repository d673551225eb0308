"""`triton.backends.compiler`: `GPUTarget`, `BaseBackend` and tegula's two compiler backends.

`BaseBackend` has Triton 3.6's interface: `supports_target`, `hash()` (changes whenever
the code generated for the target may change), `parse_options(dict)` (the options a
compile would use: every `CompileOptions` field plus the target facts Triton's options
carry, `supported_fp8_dtypes`, `backend_name`, `arch`, `warp_size`), the argument
specialization helpers (`get_arg_specialization`, `parse_attr`) and `get_module_map`.
tegula's stage pipeline is fixed by its compiler driver (`tegula.runtime.compiler`), so
`add_stages` lists tegula's stage names with functions that say so; `load_dialects` has
no MLIR to load.

`CudaCompilerBackend` serves `GPUTarget("cuda", capability, 32)`, `CpuCompilerBackend`
the host (`GPUTarget("cpu", ...)`, and tegula's `"interpreter"` target).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import ModuleType
from typing import Any, Dict, Optional

from ...backends.compiler import GPUTarget
from ...runtime.options import CompileOptions


class Language(Enum):
    """The input language being compiled (Triton's; tegula compiles TRITON)."""
    TRITON = 0
    GLUON = 1


@dataclass(frozen=True)
class BackendOptions(CompileOptions):
    """What `parse_options` returns: the compile options and the target's facts."""
    backend_name: str = ""
    arch: Any = None
    warp_size: int = 32
    supported_fp8_dtypes: tuple[str, ...] = ("fp8e5", "fp8e4nv")
    deprecated_fp8_dot_operand_dtypes: tuple[str, ...] = ()
    cluster_dims: tuple[int, int, int] = (1, 1, 1)
    # `arch` is the target's (or the `arch` option's, when one was given): a fact here
    _arch_is_request = False


class BaseBackend:
    """A compiler for the targets it supports (see the module docstring)."""

    supports_native_tensor_specialization = True
    supports_native_tensordesc_specialization = True
    backend_name = ""

    def __init__(self, target: GPUTarget) -> None:
        if not self.supports_target(target):
            raise ValueError(f"{type(self).__name__} does not compile for {target}")
        self.target = target

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        raise NotImplementedError

    def hash(self) -> str:
        """Identity of the code this backend generates for its target: tegula's version,
        a hash of its compiler's source, LLVM's version and the target."""
        from ...runtime.cache import versions

        t = self.target
        return f"{versions()}|{t.backend}|{t.arch}|{t.warp_size}"

    def _target_facts(self) -> dict[str, Any]:
        return {"backend_name": self.backend_name, "arch": self.target.arch,
                "warp_size": self.target.warp_size}

    def parse_options(self, options: Optional[dict]) -> BackendOptions:
        base = CompileOptions.from_dict(dict(options or {}), strict=False)
        values = base.as_dict()
        requested = values.pop("arch")  # the `arch` option or TRITON_OVERRIDE_ARCH ("sm80")
        facts = self._target_facts()
        if requested is not None:
            facts["arch"] = requested
        for k in ("supported_fp8_dtypes", "deprecated_fp8_dot_operand_dtypes"):
            if options and k in options:
                facts[k] = tuple(options[k])
        return BackendOptions(**values, **facts)

    def add_stages(self, stages: dict, options: Any, language: Language = Language.TRITON) -> None:
        """tegula's stages run in a fixed order inside `tegula.runtime.compiler.compile`;
        they are listed here by name so tools that inspect the pipeline see them."""
        for name in self.stage_names:
            stages[name] = _fixed_stage(name)

    stage_names: tuple[str, ...] = ("tir", "tir_opt")

    def load_dialects(self, context: Any) -> None:
        """tegula has no MLIR dialects to load."""

    def get_module_map(self) -> Dict[str, ModuleType]:
        from ...language.extra import libdevice

        return {"triton.language.extra.libdevice": libdevice}

    def get_codegen_implementation(self, options: Any = None) -> dict:
        return {}

    def pack_metadata(self, metadata: Any) -> Any:
        return metadata

    # ------------------------------------------------------------ argument specialization
    @staticmethod
    def parse_attr(desc: str) -> list:
        """The attributes a specialization string stands for ("D": divisible by 16)."""
        assert isinstance(desc, str)
        return [["tt.divisibility", 16]] if "D" in desc else []

    @staticmethod
    def get_int_specialization(arg: int, **kwargs: Any) -> str:
        return "D" if kwargs.get("align", False) and arg % 16 == 0 else ""

    @staticmethod
    def get_tensor_specialization(arg: Any, **kwargs: Any) -> str:
        if not kwargs.get("align", False):
            return ""
        if hasattr(arg, "data_ptr"):
            return "D" if arg.data_ptr() % 16 == 0 else ""
        from ...runtime.specialization import spec_value  # numpy, CuPy, DLPack arrays

        return "D" if spec_value(arg, True, True)[1] >= 16 else ""

    @staticmethod
    def get_tensordesc_specialization(arg: Any, **kwargs: Any) -> str:
        return ""

    @staticmethod
    def get_arg_specialization(arg: Any, ty: str, **kwargs: Any) -> str:
        """A string unique to each specialization of `arg` (`ty` is "int" or "tensor")."""
        if ty == "int":
            return BaseBackend.get_int_specialization(arg, **kwargs)
        if ty == "tensor":
            return BaseBackend.get_tensor_specialization(arg, **kwargs)
        return ""


def _fixed_stage(name: str):
    def stage(src: Any, metadata: Any) -> Any:
        raise NotImplementedError(
            f"tegula runs stage '{name}' inside tegula.runtime.compiler.compile; "
            "its stages cannot be called one by one")

    stage.__name__ = f"make_{name}"
    return stage


class CudaCompilerBackend(BaseBackend):
    """NVIDIA GPUs (tegula's CUDA backend: PTX through LLVM, cubin through ptxas)."""

    backend_name = "cuda"
    stage_names = ("tir", "tir_opt", "tgir", "llir", "ptx", "cubin")

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cuda"

    def _target_facts(self) -> dict[str, Any]:
        facts = super()._target_facts()
        arch = _capability(self.target.arch)
        facts["supported_fp8_dtypes"] = ("fp8e5", "fp8e4b15", "fp8e4nv") if arch >= 89 else ("fp8e5", "fp8e4b15")
        facts["deprecated_fp8_dot_operand_dtypes"] = ("fp8e4b15",) if arch >= 90 else ()
        return facts


class CpuCompilerBackend(BaseBackend):
    """The host: tegula's compiled CPU backend when enabled, else its interpreter."""

    backend_name = "cpu"
    stage_names = ("tir", "tir_opt", "llir")

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend in ("cpu", "interpreter")


def _capability(arch: Any) -> int:
    if isinstance(arch, str):
        arch = arch.lower().removeprefix("sm_").rstrip("a")
    try:
        return int(arch)
    except (TypeError, ValueError):
        return 0


__all__ = ["BackendOptions", "BaseBackend", "CpuCompilerBackend", "CudaCompilerBackend", "GPUTarget",
           "Language"]
