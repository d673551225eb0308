"""The hardware-facing building blocks of the lowering, as one object (`NVPTXDevice`):
kernel signature and annotations, special registers, barriers, 32-bit warp shuffles,
the dynamic shared-memory buffer, the tensor-core instructions (`ldmatrix`, `mma`), and the CUDA
runtime calls (`vprintf`,
`__assertfail`). Everything else in the lowering is plain LLVM IR, so substituting this
object (see `emulator.py`) runs the same lowering on the host for testing.

Also `shuffle`, which moves a value of any register type through 32-bit shuffles.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ..llvm.intrinsics import call, declare, inline_asm
from ..llvm.types import F32, I8, I32, I64, VOID, ptr_type

if TYPE_CHECKING:
    from .mma import MmaChoice

SHARED_SYMBOL = "global_smem"
FULL_MASK = ir.Constant(I32, -1)


class NVPTXDevice:
    """The real thing: NVVM intrinsics and PTX."""

    triple = "nvptx64-nvidia-cuda"
    inline_ptx = True  # loads/stores/conversions may use inline PTX

    def extra_params(self) -> list[ir.Type]:
        return []

    def begin(self, fn: ir.Function, entry: ir.IRBuilder, params: list[ir.Value]) -> None:
        fn.calling_convention = "ptx_kernel"

    def annotate(self, module: ir.Module, fn: ir.Function, num_threads: int) -> None:
        """`.reqntid`: the launcher always starts exactly `num_threads` threads per CTA
        (32 × num_warps), and saying so (as Triton does) lets ptxas rely on it."""
        module.add_named_metadata("nvvm.annotations", [fn, "reqntidx", ir.Constant(I32, num_threads)])

    def sreg(self, b: ir.IRBuilder, name: str) -> ir.Value:
        """A PTX special register: `tid.x`, `ctaid.y`, `nctaid.z`, ..."""
        return call(b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])

    def barrier(self, b: ir.IRBuilder) -> None:
        """`bar.sync 0`: all threads of the CTA; orders shared-memory accesses."""
        call(b, "llvm.nvvm.barrier0", VOID, [])

    def shfl_i32(self, b: ir.IRBuilder, kind: str, v: ir.Value, amount: ir.Value) -> ir.Value:
        # c operand: for `up` the lower clamp 0, for the others the upper clamp 31
        c = ir.Constant(I32, 0 if kind == "up" else 0x1F)
        return call(b, f"llvm.nvvm.shfl.sync.{kind}.i32", I32, [FULL_MASK, v, amount, c])

    def shared_ptr(self, b: ir.IRBuilder, byte_offset: ir.Value) -> ir.Value:
        module = b.module
        g = module.globals.get(SHARED_SYMBOL)
        if g is None:
            g = ir.GlobalVariable(module, ir.ArrayType(I8, 0), SHARED_SYMBOL, addrspace=3)
            g.linkage = "external"
            g.align = 16
            g.type = ptr_type(3)  # opaque, so GEPs over it may address any type
        return b.gep(g, [byte_offset], source_etype=I8)

    def vprintf(self, b: ir.IRBuilder, entry: ir.IRBuilder, fmt: str, args: list[ir.Value]) -> None:
        """`printf` on the device: the format as a constant string, the arguments packed
        in a local buffer (floats already widened to double) allocated in the entry
        block through the builder `entry`."""
        fmt_ptr = global_string(b, fmt)
        fn = declare(b.module, "vprintf", I32, [ptr_type(0), ptr_type(0)])
        argp: ir.Value = ir.Constant(ptr_type(0), None)
        if args:
            st = ir.LiteralStructType([a.type for a in args])
            argp = entry.alloca(st)
            argp.type = ptr_type(0)
            for i, a in enumerate(args):
                b.store(a, b.gep(argp, [ir.Constant(I32, 0), ir.Constant(I32, i)], source_etype=st))
        b.call(fn, [fmt_ptr, argp])

    def ldmatrix(self, b: ir.IRBuilder, byte_offset: ir.Value, count: int, trans: bool) -> list[ir.Value]:
        """`ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16`: this thread's row
        address (a shared byte offset) of matrix `lane // 8`; returns `count` i32
        registers, register i from matrix i. Volatile, so it stays after the barrier
        that publishes the stores it reads."""
        addr = b.ptrtoint(self.shared_ptr(b, byte_offset), I32)
        outs = ",".join(f"${i}" for i in range(count))
        asm = f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 {{{outs}}}, [${count}];"
        ret = ir.LiteralStructType([I32] * count) if count > 1 else I32
        out = inline_asm(b, ret, [addr], asm, ",".join(["=r"] * count + ["r"]), side_effect=True)
        return [b.extract_value(out, i) for i in range(count)] if count > 1 else [out]

    def mma(self, b: ir.IRBuilder, choice: "MmaChoice", a: list[ir.Value], bb: list[ir.Value],
            c: list[ir.Value]) -> list[ir.Value]:
        """One warp-wide `mma.sync` (see `mma.MmaChoice`): `a` four and `bb` two i32
        registers of packed operand elements, `c` the four accumulators (f32 or i32);
        returns the four results."""
        acc_ty = c[0].type
        reg = "f" if acc_ty == F32 else "r"
        asm = (f"{choice.ptx} {{$0,$1,$2,$3}}, {{$4,$5,$6,$7}}, {{$8,$9}}, {{$10,$11,$12,$13}};")
        cons = ",".join([f"={reg}"] * 4 + ["r"] * 6 + ["0", "1", "2", "3"])
        ret = ir.LiteralStructType([acc_ty] * 4)
        out = inline_asm(b, ret, [*a, *bb, *c], asm, cons)
        return [b.extract_value(out, i) for i in range(4)]

    def assertfail(self, b: ir.IRBuilder, message: str, file: str, line: int, func: str) -> None:
        """CUDA's `__assertfail`: prints the message and traps the kernel."""
        fn = declare(b.module, "__assertfail", VOID, [ptr_type(0), ptr_type(0), I32, ptr_type(0), I64])
        b.call(fn, [global_string(b, message), global_string(b, file), ir.Constant(I32, line),
                    global_string(b, func), ir.Constant(I64, 1)])


def shuffle(dev: NVPTXDevice, b: ir.IRBuilder, kind: str, v: ir.Value, amount: ir.Value) -> ir.Value:
    """`shfl.sync.<kind>` (bfly, up, down, idx) of a value of any register type: narrow
    values are widened to 32 bits, 64-bit values go as two halves."""
    ty = v.type
    if isinstance(ty, ir.PointerType):
        return b.inttoptr(shuffle(dev, b, kind, b.ptrtoint(v, I64), amount), ty)
    if isinstance(ty, ir.IntType):
        if ty.width == 32:
            return dev.shfl_i32(b, kind, v, amount)
        if ty.width < 32:
            return b.trunc(dev.shfl_i32(b, kind, b.zext(v, I32), amount), ty)
        lo = dev.shfl_i32(b, kind, b.trunc(v, I32), amount)
        hi = dev.shfl_i32(b, kind, b.trunc(b.lshr(v, ir.Constant(I64, 32)), I32), amount)
        return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
    width = {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ty)]
    as_int = b.bitcast(v, ir.IntType(width))
    return b.bitcast(shuffle(dev, b, kind, as_int, amount), ty)


def global_string(b: ir.IRBuilder, text: str) -> ir.Value:
    """A generic pointer to a NUL-terminated constant string (deduplicated)."""
    module = b.module
    data = bytearray(text.encode("utf-8")) + b"\0"
    name = ".str." + hashlib.sha1(bytes(data)).hexdigest()[:12]
    g = module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(I8, len(data))
        g = ir.GlobalVariable(module, ty, name, addrspace=1)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, data)
        g.type = ptr_type(1)
    return b.addrspacecast(g, ptr_type(0))
