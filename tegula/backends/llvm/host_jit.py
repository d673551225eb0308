"""Compiling LLVM IR for the host CPU in-process, and calling the result through ctypes.

Shared by every backend that runs LLVM code on the host (the CUDA backend's host
emulator, the CPU backend): native target initialization, a target machine for the host
CPU and its features, module optimization and MCJIT engine creation, the runtime helper
LLVM expects for f32 → bf16 rounding on x86, ctypes types of IR parameter types, and a
wrapper for half/bfloat scalar parameters (which ctypes cannot pass).
"""
from __future__ import annotations

import ctypes
import functools
import re
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ...ir.types import PointerType, ScalarType, element_of
from .types import BF16, F32, I16, I32


@functools.lru_cache(maxsize=None)
def init_native() -> None:
    """Initialize LLVM's native target and asm printer (once per process)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


# Host features turned off: their f32 -> bf16 instruction (vcvtneps2bf16, in its
# AVX512-BF16 and AVX-NE-CONVERT encodings) treats subnormal inputs as zero whatever
# MXCSR says, and LLVM uses it not only for fptrunc but whenever it re-narrows a bf16
# value it held in an f32 register (a bf16 phi, select or store). Without them it calls
# __truncsfbf2 (`define_truncsfbf2`), which keeps subnormals as the interpreter, torch
# and the GPU's cvt.rn.bf16.f32 do.
_FLUSHING_FEATURES = ("avx512bf16", "avxneconvert")


@functools.lru_cache(maxsize=None)
def host_cpu() -> tuple[str, str]:
    """The host CPU's name and feature string, as LLVM detects them, less the features
    whose bf16 narrowing flushes subnormals (`_FLUSHING_FEATURES`)."""
    init_native()
    feats = llvm.get_host_cpu_features().flatten().split(",")
    feats = ["-" + f[1:] if f[1:] in _FLUSHING_FEATURES else f for f in feats]
    return llvm.get_host_cpu_name(), ",".join(feats)


@functools.lru_cache(maxsize=None)
def simd_bytes() -> int:
    """The width of the host's widest SIMD registers LLVM may use (64 with AVX-512F,
    32 with AVX, else 16)."""
    feats = set(host_cpu()[1].split(","))
    if "+avx512f" in feats:
        return 64
    if "+avx" in feats:
        return 32
    return 16


def simd_registers() -> int:
    """How many SIMD registers of `simd_bytes` the host has: 32 with AVX-512 (zmm0-31)
    and on AArch64 (v0-31), 16 on other x86-64 (ymm0-15 / xmm0-15)."""
    if simd_bytes() >= 64 or llvm_triple().startswith(("aarch64", "arm64")):
        return 32
    return 16


def llvm_triple() -> str:
    """The LLVM triple of this process (the host)."""
    return llvm.get_process_triple()


def target_machine(opt: int = 2, native: bool = True, features: str = "") -> Any:
    """A target machine for the host: the host CPU and all its features when `native`
    (plus `features`, e.g. tuning flags), else the generic CPU of the process triple
    with `features` only."""
    init_native()
    target = llvm.Target.from_default_triple()
    if native:
        cpu, feats = host_cpu()
        feats = feats + ("," + features if features else "")
        return target.create_target_machine(cpu=cpu, features=feats, opt=opt, jit=True)
    return target.create_target_machine(opt=opt, features=features, jit=True)


def optimize(mod: Any, tm: Any, level: int = 2, unroll: bool = True, slp: bool = True) -> None:
    """Run LLVM's default module pipeline at `level` on the parsed module `mod`
    (`unroll=False`: no loop unrolling, which mostly grows code and compile time when
    the vectorizer already widened and interleaved the loop; `slp=False`: no SLP
    vectorizer, see `_optimized`)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    if level >= 2:
        pto.loop_vectorization = True
        pto.slp_vectorization = slp
    if not unroll:
        pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


# A vector `and` with a constant whose last element is poison/undef: LLVM 22's X86
# combineAVX512SetCCToKMOV asserts on `icmp ne (and (splat x), <c0, ..., poison>), 0`
# (APInt::extractBits; fixed upstream by llvm-project PR 224268), aborting the process.
# The SLP vectorizer makes that shape of three bit tests of one index widened to four
# lanes (Inductor's sort_with_index: `(i & 8) != 0`, `(i & 16) != 0`, `(i & 32) != 0`).
_AND_WITH_TRAILING_POISON = re.compile(r"= and <\d+ x i\d+> [^,\n]+, <[^<>\n]*(?:poison|undef)>")


_POISON_ELEMENT = re.compile(r"\b(?:poison|undef)\b")


def _optimized(llir: str, tm: Any, level: int, unroll: bool) -> Any:
    """`llir` parsed, verified and optimized. On an AVX-512 host, a module whose
    optimized form holds the shape that crashes LLVM's code generator
    (`_AND_WITH_TRAILING_POISON`) has the poison lanes of those constants set to 0 (a
    poison lane may be given any value) and is parsed again: an aborted process
    otherwise. (The first workaround optimized such a module again without the SLP
    vectorizer that made the shape: Inductor's sort over 256 values then spent 42 of
    its 65 s in LLVM's optimizer.)"""
    init_native()
    mod = llvm.parse_assembly(llir)
    mod.verify()
    optimize(mod, tm, level, unroll)
    if level >= 2 and simd_bytes() >= 64:
        text = str(mod)
        if _AND_WITH_TRAILING_POISON.search(text):
            fixed = _AND_WITH_TRAILING_POISON.sub(lambda m: _POISON_ELEMENT.sub("0", m.group(0)), text)
            mod = llvm.parse_assembly(fixed)
            mod.verify()
    return mod


def jit(llir: str, tm: Any, level: int = 2) -> Any:
    """Parse, verify, optimize and JIT-compile `llir`; returns the finalized MCJIT engine
    (keep it alive as long as its functions are called)."""
    mod = _optimized(llir, tm, level, True)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return engine


def compile_object(llir: str, tm: Any, level: int = 2, assembly: bool = True,
                   unroll: bool = True) -> tuple[bytes, str]:
    """Parse, verify and optimize `llir` once; return its object code for `tm` and
    (when `assembly`) its assembly text."""
    mod = _optimized(llir, tm, level, unroll)
    asm = tm.emit_assembly(mod) if assembly else ""
    return bytes(tm.emit_object(mod)), asm


def load_object(obj: bytes, tm: Any) -> Any:
    """An MCJIT engine holding the object code `obj` (from `compile_object` with a
    target machine equal to `tm`), finalized: keep it alive while its code runs."""
    init_native()
    empty = llvm.parse_assembly(f'target triple = "{llvm_triple()}"')
    engine = llvm.create_mcjit_compiler(empty, tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
    engine.finalize_object()
    return engine


def define_truncsfbf2(module: ir.Module) -> None:
    """f32 → bf16 rounding (nearest even; NaN stays NaN): the runtime function LLVM
    calls for it on x86, which the JIT could not resolve otherwise."""
    if "__truncsfbf2" in module.globals:
        return
    fn = ir.Function(module, ir.FunctionType(BF16, [F32]), "__truncsfbf2")
    b = ir.IRBuilder(fn.append_basic_block())
    v = fn.args[0]
    bits = b.bitcast(v, I32)
    odd = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    out = b.lshr(b.add(bits, b.add(odd, ir.Constant(I32, 0x7FFF))), ir.Constant(I32, 16))
    quiet = b.or_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    out = b.select(b.fcmp_unordered("uno", v, v), quiet, out)
    b.ret(b.bitcast(b.trunc(out, I16), BF16))


@functools.lru_cache(maxsize=None)
def libc() -> ctypes.CDLL:
    """The process's C library (printf's buffer, pthread barriers)."""
    return ctypes.CDLL(None)


def ctype(t: Any) -> Any:
    """The ctypes type a parameter of IR type `t` is passed as."""
    e = element_of(t)
    if isinstance(e, PointerType):
        return ctypes.c_void_p
    if isinstance(e, ScalarType):
        if e.is_bool:
            return ctypes.c_int32
        if e.is_float:
            # 16- and 8-bit floats travel as their bit patterns (see `host_entry`)
            return {8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_float, 64: ctypes.c_double}[e.bits]
        return getattr(ctypes, f"c_{'' if e.is_signed else 'u'}int{e.bits}")
    raise TypeError(t)


def host_entry(module: ir.Module, fn: ir.Function) -> str:
    """The name of the function ctypes calls: `fn` itself, or, when it takes
    half/bfloat parameters (which the x86-64 ABI passes in SSE registers, and ctypes
    cannot produce), a wrapper taking those as i16 bit patterns."""
    params = list(fn.function_type.args)
    narrow = {i for i, t in enumerate(params) if str(t) in ("half", "bfloat")}
    if not narrow:
        return fn.name
    wrapper = ir.Function(module, ir.FunctionType(ir.VoidType(), [I16 if i in narrow else t
                                                                   for i, t in enumerate(params)]),
                          fn.name + ".host_entry")
    b = ir.IRBuilder(wrapper.append_basic_block())
    b.call(fn, [b.bitcast(a, params[i]) if i in narrow else a for i, a in enumerate(wrapper.args)])
    b.ret_void()
    return wrapper.name
