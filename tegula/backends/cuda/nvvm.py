"""The hardware-facing building blocks of the lowering, as one object (`NVPTXDevice`):
kernel signature and annotations, special registers, barriers, 32-bit warp shuffles,
the dynamic shared-memory buffer, the CUDA runtime calls (`vprintf`, `__assertfail`),
and every PTX instruction the lowering emits as inline assembly: the tensor-core
instructions (`ldmatrix`, `mma`), predicated and cache-hinted global loads and stores
(`ld_global`, `st_global`), the SFU approximations (`ex2_approx`, `ex2_approx_ftz`, `sqrt_approx_ftz`,
`rsqrt_approx_ftz`, `div_full`), the hardware conversions (`cvt_f32_to_fp8`,
`cvt_from_fp8`, `cvt_rz`) and libdevice calls (`libdevice_call`). Everything else in
the lowering is plain LLVM IR, so substituting this object runs the same lowering on
the host: the emulator's `HostDevice` (backends/cuda/emulator) overrides each method
listed in `INSTRUCTIONS` with a host model. The tensor-memory-accelerator family
(tensor-map parameters, mbarriers, bulk tensor copies) is its mixin `nvvm_tma.TmaInstructions`.

Also `shuffle`, which moves a value of any register type through 32-bit shuffles.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import llvmlite.ir as ir

from ..llvm.intrinsics import call, declare, inline_asm
from ..llvm.types import BF16, F16, F32, I8, I16, I32, I64, VOID, ptr_type
from .nvvm_tma import TmaInstructions
from .packed_registers import is_f16, pack_registers, unpack_registers

if TYPE_CHECKING:
    from .mma import MmaChoice

SHARED_SYMBOL = "global_smem"
FULL_MASK = ir.Constant(I32, -1)
_FP8_PTX = {"f8e4m3": "e4m3x2", "f8e5m2": "e5m2x2"}


def _i32(v: "int | ir.Value") -> ir.Value:
    return ir.Constant(I32, v) if isinstance(v, int) else v


def access_words(nbytes: int) -> tuple[ir.Type, int]:
    """(LLVM word type, word count) a global access of `nbytes` bytes moves as: 32-bit
    words from 4 bytes up, else one 16-bit register (which a 1-byte access fills with
    its byte)."""
    return (I32, nbytes // 4) if nbytes >= 4 else (I16, 1)


class NVPTXDevice(TmaInstructions):
    """The real thing: NVVM intrinsics and PTX."""

    triple = "nvptx64-nvidia-cuda"
    # atomics may use inline PTX (lower_atomic; the host uses LLVM's atomics instead)
    inline_ptx = True
    # the methods that emit a hardware instruction: a host device models each of them
    INSTRUCTIONS = ("sreg", "barrier", "shfl_i32", "prmt", "shared_ptr", "ldmatrix", "mma", "ld_global", "st_global",
                    "shared_address", "cp_async", "cp_async_commit", "cp_async_wait", "fence_proxy_async",
                    "wgmma_fence", "wgmma", "wgmma_rs", "wgmma_commit", "wgmma_wait",
                    "ex2_approx", "ex2_approx_ftz", "sqrt_approx_ftz", "rsqrt_approx_ftz", "div_full",
                    "cvt_f32_to_fp8", "cvt_f32x2_to_fp8", "cvt_from_fp8", "cvt_rz", "libdevice_call", "vprintf",
                    "assertfail", "griddepcontrol", "globaltimer",
                    "tensormap_address", "mbarrier_init", "fence_mbarrier_init", "mbarrier_expect_tx",
                    "tma_load", "mbarrier_wait", "mbarrier_inval", "mbarrier_arrive", "named_barrier",
                    "named_barrier_arrive", "setmaxnreg",
                    "warp_sync", "tma_store", "bulk_commit", "bulk_wait_read", "access_alignment")

    # the least PTX ISA version (x10) the instructions emitted so far need beyond the
    # target's default (codegen.ptx_version): an fp8 `mma.sync` needs 8.4
    ptx_isa = 0

    def extra_params(self) -> list[ir.Type]:
        return []

    def begin(self, fn: ir.Function, entry: ir.IRBuilder, params: list[ir.Value]) -> None:
        fn.calling_convention = "ptx_kernel"

    def annotate(self, module: ir.Module, fn: ir.Function, num_threads: int) -> None:
        """`.reqntid`: the launcher always starts exactly `num_threads` threads per CTA
        (32 × num_warps), and saying so (as Triton does) lets ptxas rely on it."""
        module.add_named_metadata("nvvm.annotations", [fn, "reqntidx", ir.Constant(I32, num_threads)])

    def warp_sync(self, b: ir.IRBuilder) -> None:
        """`bar.warp.sync -1`: the lanes of this warp reach this point together."""
        call(b, "llvm.nvvm.bar.warp.sync", VOID, [FULL_MASK])

    def named_barrier(self, b: ir.IRBuilder, index: "int | ir.Value", threads: int) -> None:
        """`bar.sync index, threads`: the `threads` threads (whole warps) of one warp
        partition wait for each other, as `barrier` does for the CTA (`index` a constant
        or a warp-uniform register). The intrinsic, as for `barrier`, is convergent: LLVM
        never copies it into divergent paths (it did with an inline-asm `bar.sync`, which
        hung the partition)."""
        call(b, "llvm.nvvm.barrier.cta.sync.aligned.count", VOID, [_i32(index), ir.Constant(I32, threads)])

    def named_barrier_arrive(self, b: ir.IRBuilder, index: "int | ir.Value", threads: int) -> None:
        """`bar.arrive index, threads`: this warp counts towards the `threads` of named
        barrier `index` without waiting for it (the warps that `bar.sync` there wait)."""
        call(b, "llvm.nvvm.barrier.cta.arrive.aligned.count", VOID, [_i32(index), ir.Constant(I32, threads)])

    def setmaxnreg(self, b: ir.IRBuilder, action: str, count: int) -> None:
        """`setmaxnreg.{inc,dec}.sync.aligned.u32 count` (sm_90a): this warpgroup's
        registers per thread grow (from the CTA's pool, waiting for them) or shrink."""
        call(b, f"llvm.nvvm.setmaxnreg.{action}.sync.aligned.u32", VOID, [ir.Constant(I32, count)])

    def sreg(self, b: ir.IRBuilder, name: str) -> ir.Value:
        """A 32-bit PTX special register: `tid.x`, `ctaid.y`, `nctaid.z`, `smid`, ..."""
        return call(b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])

    def globaltimer(self, b: ir.IRBuilder) -> ir.Value:
        """`mov.u64 %rd, %globaltimer`: the GPU's nanosecond timer. Volatile inline
        assembly, as Triton emits it: each read stays where the program put it (the
        NVVM intrinsic may be merged or moved by LLVM)."""
        return inline_asm(b, I64, [], "mov.u64 $0, %globaltimer;", "=l", side_effect=True)

    def griddepcontrol(self, b: ir.IRBuilder, action: str) -> None:
        """`griddepcontrol.wait` or `griddepcontrol.launch_dependents` (sm_90)."""
        inline_asm(b, VOID, [], f"griddepcontrol.{action};", "~{memory}", side_effect=True)

    def barrier(self, b: ir.IRBuilder) -> None:
        """`bar.sync 0`: all threads of the CTA; orders shared-memory accesses."""
        call(b, "llvm.nvvm.barrier0", VOID, [])

    def shfl_i32(self, b: ir.IRBuilder, kind: str, v: ir.Value, amount: ir.Value) -> ir.Value:
        # c operand: for `up` the lower clamp 0, for the others the upper clamp 31
        c = ir.Constant(I32, 0 if kind == "up" else 0x1F)
        return call(b, f"llvm.nvvm.shfl.sync.{kind}.i32", I32, [FULL_MASK, v, amount, c])

    def prmt(self, b: ir.IRBuilder, a: ir.Value, c: ir.Value, selector: ir.Value) -> ir.Value:
        """`prmt.b32 d, a, c, selector`: byte i of d is byte `selector[4i+2:4i]` of the
        eight bytes {c, a} (0-3 from a, 4-7 from c)."""
        return inline_asm(b, I32, [a, c, selector], "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r")

    def opaque_i32(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        """`v` through a `mov`: the same value, of whose bits LLVM knows nothing (so it
        does not turn a later `add` into an `or`, see `lower_wgmma.base_descriptor`)."""
        return inline_asm(b, I32, [v], "mov.b32 $0, $1;", "=r,r")

    def shared_ptr(self, b: ir.IRBuilder, byte_offset: ir.Value, nbytes: int = 1) -> ir.Value:
        del nbytes  # the GPU checks its own accesses
        module = b.module
        g = module.globals.get(SHARED_SYMBOL)
        if g is None:
            g = ir.GlobalVariable(module, ir.ArrayType(I8, 0), SHARED_SYMBOL, addrspace=3)
            g.linkage = "external"
            g.align = 1024  # the 128-byte NVMMA swizzle is a function of address bits 4-9
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

    def stmatrix(self, b: ir.IRBuilder, byte_offset: ir.Value, words: list[ir.Value], trans: bool = False) -> None:
        """`stmatrix.sync.aligned.m8n8.x{len(words)}[.trans].shared.b16` (sm_90): this
        thread's row address (a shared byte offset) of matrix `lane // 8`; `words[i]` is
        its register of matrix i (row `lane // 4`, elements `2 (lane % 4)` and the next;
        with `trans`, rows `2 (lane % 4)` and the next of column `lane // 4`).
        Volatile: it stays before the barrier that publishes it."""
        addr = b.ptrtoint(self.shared_ptr(b, byte_offset), I32)
        count = len(words)
        ins = ",".join(f"${i + 1}" for i in range(count))
        asm = f"stmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 [$0], {{{ins}}};"
        inline_asm(b, ir.VoidType(), [addr] + list(words), asm, ",".join(["r"] * (count + 1)), side_effect=True)

    def mma(self, b: ir.IRBuilder, choice: "MmaChoice", a: list[ir.Value], bb: list[ir.Value],
            c: list[ir.Value]) -> list[ir.Value]:
        """One warp-wide `mma.sync` (see `mma.MmaChoice`): `a` four and `bb` two i32
        registers of packed operand elements, `c` the four accumulators (f32, i32 or
        f16); returns the four results. f16 accumulators are two `.f16x2` registers
        (elements 0-1 and 2-3, `packed_registers`)."""
        acc_ty = c[0].type
        if choice.ab_type in ("e4m3", "e5m2"):  # sm_89+, PTX ISA 8.4
            self.ptx_isa = max(self.ptx_isa, 84)
        if is_f16(c[0]):
            words = pack_registers(b, list(c), 2)
            asm = f"{choice.ptx} {{$0,$1}}, {{$2,$3,$4,$5}}, {{$6,$7}}, {{$8,$9}};"
            cons = ",".join(["=r"] * 2 + ["r"] * 6 + ["0", "1"])
            out = inline_asm(b, ir.LiteralStructType([I32] * 2), [*a, *bb, *words], asm, cons)
            return unpack_registers(b, [b.extract_value(out, i) for i in range(2)], acc_ty, 2)
        reg = "f" if acc_ty == F32 else "r"
        asm = (f"{choice.ptx} {{$0,$1,$2,$3}}, {{$4,$5,$6,$7}}, {{$8,$9}}, {{$10,$11,$12,$13}};")
        cons = ",".join([f"={reg}"] * 4 + ["r"] * 6 + ["0", "1", "2", "3"])
        ret = ir.LiteralStructType([acc_ty] * 4)
        out = inline_asm(b, ret, [*a, *bb, *c], asm, cons)
        return [b.extract_value(out, i) for i in range(4)]

    def ld_global(self, b: ir.IRBuilder, ptr: ir.Value, nbytes: int, pred: Optional[ir.Value],
                  others: Optional[list[ir.Value]], quals: str, volatile: bool) -> list[ir.Value]:
        """`[@pred] ld.global[.volatile]{quals}[.vN].bW` of `nbytes` bytes at `ptr` as
        the words of `access_words(nbytes)`; where `pred` is false the destination keeps
        `others` (one word each; `mov`ed in first, so no branch is needed)."""
        wt, nw = access_words(nbytes)
        letter, ptx_t = ("r", "b32") if wt == I32 else ("h", "b16" if nbytes == 2 else "b8")
        mov_t = "b32" if letter == "r" else "b16"
        outs = [f"${i}" for i in range(nw)]
        args: list[ir.Value] = [ptr]
        cons = [f"={letter}"] * nw + ["l"]
        lines = []
        guard = ""
        if pred is not None:
            assert others is not None and len(others) == nw
            args.append(pred)
            cons.append("b")
            guard = f"@${nw + 1} "
            for i, w in enumerate(others):
                args.append(w)
                cons.append(letter)
                lines.append(f"mov.{mov_t} ${i}, ${nw + 2 + i};")
        dst = outs[0] if nw == 1 else "{" + ", ".join(outs) + "}"
        vs = f".v{nw}" if nw > 1 else ""
        space = ".volatile.global" if volatile else ".global"
        lines.append(f"{guard}ld{space}{quals}{vs}.{ptx_t} {dst}, [${nw}];")
        ret = wt if nw == 1 else ir.LiteralStructType([wt] * nw)
        r = inline_asm(b, ret, args, "\n\t".join(lines), ",".join(cons), side_effect=True)
        return [r] if nw == 1 else [b.extract_value(r, i) for i in range(nw)]

    def st_global(self, b: ir.IRBuilder, ptr: ir.Value, nbytes: int, words: list[ir.Value],
                  pred: Optional[ir.Value], quals: str) -> None:
        """`[@pred] st.global{quals}[.vN].bW [ptr], words` (the words of
        `access_words(nbytes)`)."""
        wt, nw = access_words(nbytes)
        letter, ptx_t = ("r", "b32") if wt == I32 else ("h", "b16" if nbytes == 2 else "b8")
        args: list[ir.Value] = [ptr]
        cons = ["l"]
        guard = ""
        if pred is not None:
            args.append(pred)
            cons.append("b")
            guard = "@$1 "
        first = len(args)
        args += words
        cons += [letter] * nw
        src = f"${first}" if nw == 1 else "{" + ", ".join(f"${first + i}" for i in range(nw)) + "}"
        vs = f".v{nw}" if nw > 1 else ""
        asm = f"{guard}st.global{quals}{vs}.{ptx_t} [$0], {src};"
        inline_asm(b, VOID, args, asm, ",".join(cons) + ",~{memory}", side_effect=True)

    def cp_async(self, b: ir.IRBuilder, byte_offset: ir.Value, ptr: ir.Value, nbytes: int,
                 pred: Optional[ir.Value], src_size: Optional[ir.Value] = None,
                 through_l1: bool = False) -> None:
        """`cp.async.{cg|ca}.shared.global [smem], [ptr], nbytes, src_size` (sm_80): an
        asynchronous copy of 4, 8 or 16 bytes from global memory to the shared byte
        offset. Only the first `src_size` bytes (an i32 in 0..nbytes) are read, the rest
        are zero-filled; without it the source size is `nbytes` where `pred` holds and 0
        (nothing read) where it does not. 16-byte copies bypass L1 (`.cg`) unless
        `through_l1` (`copy_caching`); smaller ones must use `.ca`."""
        addr = b.ptrtoint(self.shared_ptr(b, byte_offset), I32)
        size = ir.Constant(I32, nbytes)
        if src_size is None:
            src_size = size if pred is None else b.select(pred, size, ir.Constant(I32, 0))
        cache = "cg" if nbytes == 16 and not through_l1 else "ca"
        asm = f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;"
        inline_asm(b, VOID, [addr, ptr, src_size], asm, "r,l,r,~{memory}", side_effect=True)

    def cp_async_commit(self, b: ir.IRBuilder) -> None:
        """`cp.async.commit_group`: the copies issued since the last commit form a group."""
        inline_asm(b, VOID, [], "cp.async.commit_group;", "~{memory}", side_effect=True)

    def cp_async_wait(self, b: ir.IRBuilder, pending: int) -> None:
        """`cp.async.wait_group N`: this thread's copy groups but the newest `pending`
        have landed (other threads' copies need a barrier after it to be visible)."""
        inline_asm(b, VOID, [], f"cp.async.wait_group {pending};", "~{memory}", side_effect=True)

    def access_alignment(self, b: ir.IRBuilder, address: ir.Value, nbytes: int, space: str) -> int:
        """The alignment to emit an `nbytes` access with, at `address` (a shared byte
        offset, or a global pointer; `space` says which): its size, which the
        specialization and the layouts guarantee. The host emulator checks it instead
        (a misaligned vector access faults on the GPU, not on an x86 host) and emits
        the access unaligned (`emulator/faults.py`)."""
        return nbytes

    def shared_address(self, b: ir.IRBuilder, byte_offset: ir.Value) -> ir.Value:
        """The 32-bit shared-window address of a byte offset into the kernel's shared
        memory (what matrix descriptors and `.shared` instruction operands hold)."""
        return b.ptrtoint(self.shared_ptr(b, byte_offset), I32)

    def fence_proxy_async(self, b: ir.IRBuilder) -> None:
        """`fence.proxy.async.shared::cta` (sm_90): this thread's earlier shared-memory
        writes become visible to the async proxy (wgmma, TMA) after the next barrier."""
        inline_asm(b, VOID, [], "fence.proxy.async.shared::cta;", "~{memory}", side_effect=True)

    def wgmma_fence(self, b: ir.IRBuilder) -> None:
        """`wgmma.fence.sync.aligned`: before the first wgmma touching registers (the
        accumulators) or shared memory written since the last one."""
        inline_asm(b, VOID, [], "wgmma.fence.sync.aligned;", "~{memory}", side_effect=True)

    def wgmma(self, b: ir.IRBuilder, choice: "MmaChoice", desc_a: ir.Value, desc_b: ir.Value,
              acc: list[ir.Value], trans_b: bool, trans_a: bool = False,
              scale_d: "bool | ir.Value" = True) -> list[ir.Value]:
        """One warpgroup-wide `wgmma.mma_async` (see `mma.MmaChoice`, version 3) with A
        and B read through shared-memory matrix descriptors (A M-major when `trans_a`,
        else K-major; B N-major when `trans_b`); `acc` the n_instr / 2 accumulators of
        this thread (f32 or i32; an f16 accumulator's n_instr / 4 `.f16x2` registers as
        i32, packed by the lowering), accumulated into — or, when not `scale_d`, only their count and
        type matter: D = A·B (see `_wgmma_accumulators`)."""
        # transposes exist for 16-bit operands only (fp8 operands are always K-major)
        trans = f", {int(trans_a)}, {int(trans_b)}" if choice.elem_bytes == 2 else ""
        return self._wgmma_asm(b, choice, acc, scale_d, [desc_a, desc_b], ["l", "l"],
                               lambda n: f"${n}, ${n + 1}", trans)

    def _wgmma_asm(self, b: ir.IRBuilder, choice: "MmaChoice", acc: list[ir.Value], scale_d: "bool | ir.Value",
                   operands: list[ir.Value], constraints: list[str], operand_text: Callable[[int], str],
                   trans: str) -> list[ir.Value]:
        """The inline asm of one wgmma: outputs the accumulators, then `operands` (text
        from `operand_text(first operand's $ index)`), the scale-d predicate, the scales
        and `trans`. With `scale_d` the accumulators are tied inputs (D = A·B + D); without
        it the predicate is false and the inputs are not passed at all (D = A·B), so a
        dot whose accumulator is zero does not first set its registers to zero (a
        `mov` per register per dot: 64 in each iteration of tutorial 06's dK/dV loop).
        `scale_d` may also be an i1 decided at run time (an accumulator restarted from
        zero on some iterations only): the inputs are tied and the predicate is read
        from a register."""
        count = len(acc)
        acc_ty = acc[0].type
        reg = "f" if acc_ty == F32 else "r"
        outs = ",".join(f"${i}" for i in range(count))
        predicate = str(int(scale_d)) if isinstance(scale_d, bool) else f"${count + len(operands)}"
        scales = "" if choice.acc_type == "s32" else ", 1, 1"  # integer wgmma takes no scale-a/b
        asm = (f"{{ .reg .pred p; setp.ne.b32 p, {predicate}, 0; "
               f"{choice.ptx} {{{outs}}}, {operand_text(count)}, p{scales}{trans}; }}")
        if not isinstance(scale_d, bool):  # decided at run time: an i1, passed as a register
            operands, constraints = [*operands, b.zext(scale_d, I32)], [*constraints, "r"]
        tied = [str(i) for i in range(count)] if scale_d is not False else []
        cons = ",".join([f"={reg}"] * count + constraints + tied)
        ret = ir.LiteralStructType([acc_ty] * count)
        out = inline_asm(b, ret, list(operands) + (list(acc) if scale_d is not False else []), asm, cons,
                         side_effect=True)
        return [b.extract_value(out, i) for i in range(count)]

    def wgmma_rs(self, b: ir.IRBuilder, choice: "MmaChoice", a: list[ir.Value], desc_b: ir.Value,
                 acc: list[ir.Value], trans_b: bool, scale_d: "bool | ir.Value" = True) -> list[ir.Value]:
        """`wgmma.mma_async` with A from registers: `a` this thread's four i32 registers
        of packed A elements (mma.sync's A fragment of its warp's 16 rows: two 16-bit
        or four 8-bit elements a register); `scale_d` as in `wgmma`."""
        # B's transpose exists for 16-bit operands only (an 8-bit B is always K-major)
        trans = f", {int(trans_b)}" if choice.elem_bytes == 2 else ""
        return self._wgmma_asm(b, choice, acc, scale_d, [*a, desc_b], ["r"] * 4 + ["l"],
                               lambda n: "{" + ",".join(f"${n + i}" for i in range(4)) + f"}}, ${n + 4}", trans)

    def wgmma_commit(self, b: ir.IRBuilder) -> None:
        """`wgmma.commit_group.sync.aligned`: the wgmmas issued since the last commit."""
        inline_asm(b, VOID, [], "wgmma.commit_group.sync.aligned;", "~{memory}", side_effect=True)

    def wgmma_wait(self, b: ir.IRBuilder, acc: list[ir.Value], pending: int = 0,
                   inputs: Sequence[ir.Value] = ()) -> list[ir.Value]:
        """`wgmma.wait_group.sync.aligned N`, with the accumulators passed through it so
        that no use of them is scheduled before the wait. `inputs` (the i32 registers of
        an A operand the waited dots read) are read by it too: they stay live, so no value
        defined meanwhile is given their registers while a wgmma may still read them."""
        count = len(acc)
        acc_ty = acc[0].type
        reg = "f" if acc_ty == F32 else "r"
        cons = ",".join([f"={reg}"] * count + [str(i) for i in range(count)] + ["r"] * len(inputs) + ["~{memory}"])
        ret = ir.LiteralStructType([acc_ty] * count)
        out = inline_asm(b, ret, [*acc, *inputs], f"wgmma.wait_group.sync.aligned {pending};", cons,
                         side_effect=True)
        return [b.extract_value(out, i) for i in range(count)]

    def ex2_approx(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """`ex2.approx.f32`: 2**x on the SFU (~2 ulp)."""
        return inline_asm(b, F32, [x], "ex2.approx.f32 $0, $1;", "=f,f")

    def ex2_approx_ftz(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """`ex2.approx.ftz.f32`: 2**x on the SFU (~2 ulp), a denormal input read as zero
        and a result below 2**-126 flushed to zero: one MUFU.EX2, where the non-ftz form
        adds a compare and two multiplies to rescale denormal results."""
        return inline_asm(b, F32, [x], "ex2.approx.ftz.f32 $0, $1;", "=f,f")

    def sqrt_approx_ftz(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """`sqrt.approx.ftz.f32`: a denormal input reads as (signed) zero."""
        return inline_asm(b, F32, [x], "sqrt.approx.ftz.f32 $0, $1;", "=f,f")

    def rsqrt_approx_ftz(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """`rsqrt.approx.ftz.f32`: a denormal input reads as (signed) zero (→ ±inf)."""
        return inline_asm(b, F32, [x], "rsqrt.approx.ftz.f32 $0, $1;", "=f,f")

    def div_full(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        """`div.full.f32` (≤ 2 ulp)."""
        return inline_asm(b, F32, [x, y], "div.full.f32 $0, $1, $2;", "=f,f,f")

    def cvt_f32_to_fp8(self, b: ir.IRBuilder, v: ir.Value, fmt: str) -> ir.Value:
        """`cvt.rn.satfinite.{e4m3,e5m2}x2.f32` (sm_89+): the fp8 bit pattern (i8) of
        f32 `v`, rounded to nearest even, finite values and infinities saturated to the
        largest finite value, NaN to NaN. The pair instruction gets `v` twice."""
        asm = f"cvt.rn.satfinite.{_FP8_PTX[fmt]}.f32 $0, $1, $1;"
        return b.trunc(inline_asm(b, I16, [v], asm, "=h,f"), I8)

    def cvt_f32x2_to_fp8(self, b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, fmt: str) -> list[ir.Value]:
        """`cvt.rn.satfinite.{e4m3,e5m2}x2.f32 d, hi, lo`: both converted as
        `cvt_f32_to_fp8` does, `hi` into the upper byte of d; [lo's, hi's] bit patterns."""
        asm = f"cvt.rn.satfinite.{_FP8_PTX[fmt]}.f32 $0, $1, $2;"
        pair = inline_asm(b, I16, [hi, lo], asm, "=h,f,f")
        return [b.trunc(pair, I8), b.trunc(b.lshr(pair, ir.Constant(I16, 8)), I8)]

    def cvt_from_fp8(self, b: ir.IRBuilder, v: ir.Value, fmt: str, dst: str) -> ir.Value:
        """`cvt.rn.f16x2.{e4m3,e5m2}x2` (sm_89+), then `cvt.f32.f16` for `dst` = f32:
        fp8 bit pattern `v` (i8) as an (exactly equal) f16 or f32."""
        asm = ("{ .reg .b32 t; .reg .b16 lo, hi;\n"
               f"cvt.rn.f16x2.{_FP8_PTX[fmt]} t, $1;\n"
               "mov.b32 {lo, hi}, t;\n"
               + ("mov.b16 $0, lo; }" if dst == "f16" else "cvt.f32.f16 $0, lo; }"))
        out_ty, cons = (F16, "=h,h") if dst == "f16" else (F32, "=f,h")
        return inline_asm(b, out_ty, [b.zext(v, I16)], asm, cons)

    def cvt_rz(self, b: ir.IRBuilder, v: ir.Value, dst: str) -> ir.Value:
        """`cvt.rz.{f16,bf16}.f32`: f32 `v` rounded toward zero to `dst`."""
        r = inline_asm(b, I16, [v], f"cvt.rz.{dst}.f32 $0, $1;", "=h,f")
        return b.bitcast(r, F16 if dst == "f16" else BF16)

    def libdevice_call(self, b: ir.IRBuilder, symbol: str, args: Sequence[ir.Value], ret: ir.Type) -> ir.Value:
        """A call of libdevice's `symbol` (`__nv_*`; codegen links libdevice in)."""
        return call(b, symbol, ret, list(args))

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
