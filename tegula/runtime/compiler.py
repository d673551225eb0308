"""The compiler driver: the one module that knows the order of the stages.

    ASTSource ──frontend──▶ tir ──passes "tir_opt"──▶ tir_opt ──backend.compile──▶ tgir, llir, ptx, cubin...

`compile(src, target=None, options=None)` runs them and returns a `CompiledKernel`
whose `asm` holds every stage's text. Around the stages:
- dumping and overriding (`StageIO`): with `TEGULA_DUMP_DIR` each stage's text is
  written to `<dump_dir>/<hash>/<name>.<stage>`; with `TEGULA_OVERRIDE_DIR` a file
  `<override_dir>/<hash>/<name>.<stage>` (or `<override_dir>/<name>.<stage>`) replaces
  that stage's output (tir and tir_opt are read back with the IR parser);
- the on-disk cache (`cache.FileCache`) for backends that produce a storable binary;
  it is bypassed while dumping or overriding, and with `TEGULA_ALWAYS_COMPILE=1`.
The frontend, printer, parser and pass pipeline are reached through the small
`_frontend_build`, `_print_ir`, `_parse_ir`, `_optimize` and `_written_arguments`
functions below, imported lazily: tests replace them, and `import tegula` stays cheap.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import linecache
import os
import re
import time
from typing import Any, Mapping, Optional, Union

from .. import python_ast
from ..backends.compiler import GPUTarget
from ..config import knobs
from ..errors import CompilationError
from . import backend_registry
from .cache import Content, FileCache, compile_key
from .kernel import CompiledKernel, KernelMetadata
from .options import CompileOptions
from .source import ASTSource, IRSource
from .static_launch import leave_cubin
from .tracebacks import strip_internal_frames

__all__ = ["ASTSource", "CompiledKernel", "IRSource", "StageIO", "compile"]


# ---------------------------------------------------------------------------- the other layers

def _frontend_build(fn: Any, signature: dict, constexprs: dict, attrs: dict, options: Any,
                    arg_trees: Optional[dict] = None, name: Optional[str] = None) -> Any:
    from ..frontend import build_kernel

    return build_kernel(fn, signature, constexprs, attrs, options, arg_trees=arg_trees, name=name)


def _print_ir(kernel: Any) -> str:
    from ..ir.printer import print_ir

    return print_ir(kernel)


def _parse_ir(text: str) -> Any:
    from ..ir.parser import parse_ir

    return parse_ir(text)


def _optimize(kernel: Any) -> Any:
    from ..passes import run_pipeline

    return run_pipeline(kernel, "tir_opt")


def _written_arguments(kernel: Any) -> set[str]:
    from ..passes import written_arguments

    return written_arguments(kernel)


# ---------------------------------------------------------------------------- dump / override

class StageIO:
    """Dumps stage text and finds overrides for one compilation (see the module
    docstring). Backends call `emit(stage, content)` for each stage they produce and
    continue from what it returns (the override when there is one)."""

    def __init__(self, name: str, key: str, dump_dir: str = "", override_dir: str = "",
                 override_file: Optional[str] = None):
        self.name = name
        self.key = key
        self.dump_dir = os.path.join(dump_dir, key) if dump_dir else ""
        self.override_dir = override_dir
        self.override_file = override_file
        self.emitted: set[str] = set()
        self.overridden: set[str] = set()

    @property
    def active(self) -> bool:
        return bool(self.dump_dir or self.override_dir or self.override_file)

    def _file(self, stage: str) -> str:
        return f"{self.name}.{stage}"

    def dump(self, stage: str, content: Content) -> None:
        if self.dump_dir:
            os.makedirs(self.dump_dir, exist_ok=True)
            mode, data = ("wb", content) if isinstance(content, bytes) else ("w", content)
            with open(os.path.join(self.dump_dir, self._file(stage)), mode) as f:
                f.write(data)

    def override(self, stage: str, binary: bool = False) -> Optional[Content]:
        paths = []
        if self.override_file and os.path.splitext(self.override_file)[1] == "." + stage:
            paths.append(self.override_file)
        if self.override_dir:
            paths += [os.path.join(self.override_dir, self.key, self._file(stage)),
                      os.path.join(self.override_dir, self._file(stage))]
        for path in paths:
            if os.path.isfile(path):
                self.overridden.add(stage)
                with open(path, "rb" if binary else "r") as f:
                    return f.read()
        return None

    def emit(self, stage: str, content: Content) -> Content:
        """Record `content` as stage `stage`; returns the override if one exists."""
        self.emitted.add(stage)
        replaced = self.override(stage, binary=isinstance(content, bytes))
        if replaced is not None:
            content = replaced
        self.dump(stage, content)
        return content


# ---------------------------------------------------------------------------- compile

def compile(src: Union[ASTSource, IRSource, str], target: Optional[GPUTarget] = None,
            options: Union[None, Mapping[str, Any], CompileOptions] = None, *,
            device: Optional[int] = None) -> CompiledKernel:
    """Compile `src` for `target` (default: the active device's) without launching.

    `options` is a dict of launch options (`num_warps`, `num_stages`, `num_ctas`,
    `maxnreg`, `debug`, ...; unknown keys are ignored, as in Triton) or CompileOptions.
    `device` is the device the returned kernel launches on (default: the current one)."""
    try:
        return _compile(src, target, options, device)
    except BaseException as e:
        # a public entry point: the error reaches the user without the frames below
        raise strip_internal_frames(e)


def _compile(src: Union[ASTSource, IRSource, str], target: Optional[GPUTarget],
             options: Union[None, Mapping[str, Any], CompileOptions], device: Optional[int]) -> CompiledKernel:
    if isinstance(src, str):
        src = IRSource(src)
    if target is None:
        target = backend_registry.default_target()
    backend = backend_registry.backend_for_target(target)
    if not isinstance(options, CompileOptions):
        options = CompileOptions.from_dict(options, strict=False)
    options = _target_defaults(options, target)
    fn_key = src.fn_key()
    if options.checked and isinstance(src, ASTSource):
        fn_key = f"{fn_key}|file:{src.source_file}"  # checked accesses report their file
    key, storable = compile_key(fn_key, src.signature, src.constexprs, src.attrs, options, target)
    io = StageIO(src.name, key, knobs.dump_dir, knobs.override_dir, options.ir_override)
    use_disk = (backend.disk_cacheable and storable and not io.active and not knobs.always_compile)
    cache = FileCache(key) if use_disk else None
    if cache is not None:
        files = cache.get_group(src.name)
        if files is not None:
            compiled = _from_files(src, files, backend, device)
            leave_cubin(compiled)
            return compiled

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    kernel, asm = _front(src, options, io)
    timings["frontend"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    kernel = _optimize(kernel)
    asm["tir_opt"] = io.emit("tir_opt", _print_ir(kernel))
    if "tir_opt" in io.overridden:
        kernel = _parse_ir(asm["tir_opt"])
    timings["passes"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    backend_asm, backend_md = backend.compile(kernel, options, target, io)
    for stage, content in backend_asm.items():
        if stage not in io.emitted:
            io.dump(stage, content)
    asm.update(backend_asm)
    timings["backend"] = time.perf_counter() - t0

    metadata = _metadata(src, key, target, backend.name, options, kernel, backend_md, timings)
    if cache is not None:
        _store(cache, src.name, asm, metadata)
    compiled = CompiledKernel(src, asm, metadata, ir=kernel, backend=backend, device=device)
    leave_cubin(compiled)  # where PyTorch Inductor's static launcher looks for it
    return compiled


def optimized_ir(src: Union[ASTSource, IRSource],
                 options: Union[None, Mapping[str, Any], CompileOptions] = None) -> Any:
    """The kernel's tile IR after the target-independent passes (stage `tir_opt`),
    without a backend: what analyses of a kernel (its written arguments) look at."""
    if not isinstance(options, CompileOptions):
        options = CompileOptions.from_dict(options, strict=False)
    kernel, _asm = _front(src, options, StageIO(src.name, "analysis"))
    return _optimize(kernel)


def _target_defaults(options: CompileOptions, target: GPUTarget) -> CompileOptions:
    """Options whose value the target decides, as Triton's CUDA backend does: fp8 dots
    may accumulate imprecisely on sm_90 (its fp8 tensor cores keep fewer mantissa bits
    than f32) unless the dot asks otherwise; elsewhere they accumulate exactly."""
    arch = getattr(target, "arch", None)
    if isinstance(arch, str):
        arch = arch.lower().removeprefix("sm_").rstrip("a")
    hopper = getattr(target, "backend", None) == "cuda" and str(arch) == "90"
    imprecise = 2**30 if hopper else 0
    if options.max_num_imprecise_acc_default == imprecise:
        return options
    return dataclasses.replace(options, max_num_imprecise_acc_default=imprecise)


def _front(src: Union[ASTSource, IRSource], options: CompileOptions,
           io: StageIO) -> tuple[Any, dict[str, Content]]:
    """The kernel IR before optimization, and the `tir` text when there is one."""
    if isinstance(src, IRSource):
        # A .tir_opt file is still run through the passes: they are idempotent.
        return _parse_ir(src.text), ({"tir": src.text} if src.stage == "tir" else {})
    try:
        trees = getattr(src, "arg_trees", None)
        extra: dict = {"arg_trees": trees} if trees else {}  # tuple / descriptor parameters (runtime.arg_trees)
        if src.name != src.fn.__name__:
            extra["name"] = src.name  # named by the kernel's `repr=` (source.ASTSource)
        kernel = _frontend_build(src.fn, dict(src.signature), dict(src.constexprs), dict(src.attrs), options,
                                 **extra)
    except CompilationError as err:
        _note_scalar_arguments(err, src)
        raise
    text = io.emit("tir", _print_ir(kernel))
    if "tir" in io.overridden:
        kernel = _parse_ir(text)
    return kernel, {"tir": text}


def _metadata(src: Any, key: str, target: GPUTarget, backend: str, options: CompileOptions,
              kernel: Any, backend_md: Mapping[str, Any], timings: dict) -> KernelMetadata:
    written = _written_arguments(kernel)
    params = list(src.param_names)
    indices = [i for i, n in enumerate(params) if src.signature.get(n) != "constexpr"]
    md = KernelMetadata(
        name=src.name, hash=key, target=target, backend=backend,
        num_warps=options.num_warps, num_stages=options.num_stages, num_ctas=options.num_ctas,
        maxnreg=options.maxnreg, debug=options.debug, checked=options.checked, shared=0,
        signature=dict(src.signature), param_names=params,
        arg_names=[params[i] for i in indices], arg_indices=indices,
        written_args=tuple(n for n in params if n in written),
        timings=timings,
    )
    for k, v in backend_md.items():
        setattr(md, k, v)
    return md


def _store(cache: FileCache, name: str, asm: Mapping[str, Content], metadata: KernelMetadata) -> None:
    try:
        meta = json.dumps(_jsonable(metadata))
    except (TypeError, ValueError):
        return  # metadata that JSON cannot hold would not come back equal: do not store
    files = {f"{name}.{stage}": content for stage, content in asm.items()}
    files[f"{name}.json"] = meta
    cache.put_group(name, files)


def _jsonable(md: KernelMetadata) -> dict[str, Any]:
    out = md._asdict()
    t = md.target
    out["target"] = {"backend": t.backend, "arch": t.arch, "warp_size": t.warp_size}
    return out


def _from_files(src: Any, files: dict[str, Content], backend: Any, device: Optional[int]) -> CompiledKernel:
    prefix = src.name + "."
    raw = json.loads(files[prefix + "json"])
    raw["target"] = GPUTarget(**raw["target"])
    for k in ("arg_indices", "param_names", "arg_names"):
        raw[k] = list(raw[k])
    raw["written_args"] = tuple(raw["written_args"])
    asm = {name[len(prefix):]: content for name, content in files.items()
           if name.startswith(prefix) and name != prefix + "json"}
    return CompiledKernel(src, asm, KernelMetadata(**raw), ir=None, backend=backend, device=device)


# ---------------------------------------------------------------------------- error notes

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _note_scalar_arguments(err: CompilationError, src: ASTSource) -> None:
    """When a load, store or atomic got a non-pointer where it needs a pointer, and an
    argument of the failing pointer operand was passed a scalar (a float where the kernel
    expected a tensor), say which argument and what it was given. Only then: an error
    that merely mentions pointers (a float added to a pointer) has another cause."""
    if "expected a pointer" not in (err.message or ""):
        return
    scalars = {n: t for n, t in src.signature.items() if t != "constexpr" and not t.startswith("*")}
    named = [n for n in _pointer_operand_names(err) if n in scalars]
    # `x_ptr + n` with x_ptr a float is a float: the argument whose type the message
    # names is the one that was meant to be a pointer, not the int offset beside it.
    typed = [n for n in named if re.search(rf"\b{scalars[n]}\b", err.message)]
    named = typed or named or [n for n in scalars if "ptr" in n.lower()]
    if not named:
        return
    what = ", ".join(f"'{n}' is a scalar ({_scalar_kind(scalars[n])})" for n in named)
    note = (f"note: in this launch {what}; pass an array or tensor for an argument the kernel "
            "uses as a pointer")
    err.args = (f"{err}\n{note}",)


def _pointer_operand_names(err: CompilationError) -> list[str]:
    """The names in the pointer operand of the call at the error's location (the first
    argument, or `pointer=`/`ptr=`/`base=`); every name on the line when it cannot tell."""
    loc = err.loc
    if loc is None or loc.line <= 0:
        return []
    line = linecache.getline(loc.file, loc.line)
    end = loc.end_col if loc.end_col and loc.end_col > loc.col else len(line)
    try:
        node = python_ast.parse(line[loc.col:end].strip(), mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, ast.Call):
        operand = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg in ("pointer", "ptr", "base")), None)
        if operand is not None:
            return list(dict.fromkeys(n.id for n in ast.walk(operand) if isinstance(n, ast.Name)))
    return list(dict.fromkeys(_IDENT.findall(line)))


def _scalar_kind(sig: str) -> str:
    if sig.startswith("fp") or sig.startswith("bf"):
        return f"{sig}, from a Python float"
    if sig == "i1":
        return "i1, from a bool"
    return f"{sig}, from an int"
