"""Lowering of `dot` with FMAs, for the dots no tensor-core instruction computes
(`lower_mma` takes the others: the layout plan records which).

The operands are written to shared memory (A transposed, [K][M], so that a thread's
consecutive rows are one vector; B as [K][N]), then a loop over k reads, for each
thread, the A column entries of its accumulator rows and the B row entries of its
columns and does one FMA per accumulator register. A batched (3-D) dot stores each batch
after the other and adds the batch index to every offset. The accumulator layout
(`layouts.fma_dot_layout`) gives each thread a near-square sub-tile so every value read
feeds several FMAs. fp16/bf16/fp8 operands are widened to f32 and accumulate in f32;
`input_precision="tf32"` rounds f32 operands with `cvt.rna.tf32.f32` first (as the
tensor cores would); integer operands accumulate in 32 bits.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import F32, F64, ScalarType, element_of
from ...ir.types import I32 as T_I32
from ..llvm import casts
from ..llvm.intrinsics import intrinsic
from ..llvm.types import F32 as LF32
from ..llvm.types import I32, byte_size
from .convert import smem_load, smem_store
from .linear_layout import LinearLayout, dim_fields, dim_run
from .lower_mma import lower_dot_mma
from .lower_wgmma import lower_dot_wgmma
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


def _compute_type(e: ScalarType) -> ScalarType:
    if e.is_float:
        return F64 if e.name == "f64" else F32
    return T_I32 if e.bits <= 32 else e


def _write_operand(lw: "KernelLowering", regs: list[ir.Value], lay: LinearLayout, elem: ScalarType,
                   base: int, row_stride: int, batch_stride: int, transpose: bool) -> None:
    """Store operand registers at base + (bt * batch_stride + k * row_stride + i) * size,
    where (i, k) is (m, k) for A (transposed) and (k, n) → (n, k) for B, and bt the
    batch index of a 3-D operand."""
    b = lw.b
    size = byte_size(elem)
    for r in range(lay.n_regs):
        c = lw.element_coords(lay, r)
        i, k = (c[-2], c[-1]) if transpose else (c[-1], c[-2])
        idx = b.add(b.mul(k, ir.Constant(I32, row_stride)), i)
        if len(c) == 3:
            idx = b.add(idx, b.mul(c[0], ir.Constant(I32, batch_stride)))
        off = b.add(b.mul(idx, ir.Constant(I32, size)), ir.Constant(I32, base))
        smem_store(lw, off, [regs[r]], elem)


def _widen(lw: "KernelLowering", v: ir.Value, elem: ScalarType, ct: ScalarType, tf32: bool) -> ir.Value:
    b = lw.b
    w = casts.convert(b, lw.target, v, elem, ct)
    if tf32 and ct == F32:
        # cvt.rna.tf32.f32: keep 10 mantissa bits, round half away from zero (NaN kept)
        bits = b.add(b.bitcast(w, I32), ir.Constant(I32, 0x1000))
        r = b.bitcast(b.and_(bits, ir.Constant(I32, -0x2000)), LF32)
        w = b.select(b.fcmp_unordered("uno", w, w), w, r)
    return w


def fma_dot_bytes(a_shape, b_shape, ea: ScalarType, eb: ScalarType) -> tuple[int, int]:
    """(A's bytes, both operands' bytes) of the scratch an FMA dot stages its operands
    in: A as [batch][K][M] (16-byte aligned), then B as [batch][K][N]."""
    batch = a_shape[0] if len(a_shape) == 3 else 1
    (m_size, k_size), n_size = a_shape[-2:], b_shape[-1]
    size_a = (batch * m_size * k_size * byte_size(ea) + 15) // 16 * 16
    return size_a, size_a + batch * k_size * n_size * byte_size(eb)


@handles(Op.DOT)
def lower_dot(lw: "KernelLowering", ins: Instr) -> None:
    choice = lw.plan.mma.get(ins)
    if choice is not None:
        if choice.version == 3:
            lower_dot_wgmma(lw, ins, choice)
        else:
            lower_dot_mma(lw, ins, choice)
        return
    b = lw.b
    la, lb_, lc = (lw.plan.required(ins, k) for k in range(3))
    a_regs, b_regs, acc_regs = (lw.operand(ins, k) for k in range(3))
    ea, eb = element_of(ins.operands[0].type), element_of(ins.operands[1].type)
    ec = element_of(ins.results[0].type)
    m_size, k_size = la.shape[-2:]
    n_size = lb_.shape[-1]
    ct = _compute_type(ec)
    tf32 = ins.attrs.input_precision == "tf32" and ea.name == "f32"

    # A as [batch][K][M], B as [batch][K][N]
    a_batch, b_batch = m_size * k_size, k_size * n_size
    size_a, total = fma_dot_bytes(la.shape, lb_.shape, ea, eb)
    lw.scratch(total)
    _write_operand(lw, a_regs, la, ea, 0, m_size, a_batch, transpose=True)
    _write_operand(lw, b_regs, lb_, eb, size_a, n_size, b_batch, transpose=False)
    lw.smem_written()

    # which rows/columns this thread needs: per C register, the A column entry
    # (bt * K*M + m) and the B row entry (bt * K*N + n) at k = 0, as a register constant
    # plus this thread's part (`thread_coords`)
    coords = lw.thread_coords(lc)
    tm, tn = coords[-2], coords[-1]
    if len(coords) == 3:
        tm = b.add(tm, b.mul(coords[0], ir.Constant(I32, a_batch)))
        tn = b.add(tn, b.mul(coords[0], ir.Constant(I32, b_batch)))
    fields = dim_fields(lc.shape)
    (sm, nm), (sn, nn) = fields[-2], fields[-1]
    m_of, n_of = [], []
    for r in range(lc.n_regs):
        e = lc.reg_element(r)
        bt = (e >> fields[0][0]) & ((1 << fields[0][1]) - 1) if len(fields) == 3 else 0
        m_of.append(bt * a_batch + ((e >> sm) & ((1 << nm) - 1)))
        n_of.append(bt * b_batch + ((e >> sn) & ((1 << nn) - 1)))
    ms, ns = sorted(set(m_of)), sorted(set(n_of))
    run_m = min(dim_run(lc, len(fields) - 2), 16 // byte_size(ea))
    run_n = min(dim_run(lc, len(fields) - 1), 16 // byte_size(eb))

    acc0 = [casts.convert(b, lw.target, v, ec, ct) for v in acc_regs]
    pre = b.block
    loop = b.function.append_basic_block("dot.k")
    done = b.function.append_basic_block("dot.end")
    b.branch(loop)
    b.position_at_end(loop)
    kk = b.phi(I32)
    kk.add_incoming(ir.Constant(I32, 0), pre)
    accs = []
    for v in acc0:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        accs.append(p)

    def read(values: list[int], run: int, thread: ir.Value, stride: int, base: int,
             elem: ScalarType) -> dict[int, ir.Value]:
        out: dict[int, ir.Value] = {}
        row = b.mul(kk, ir.Constant(I32, stride))
        for start in values:
            if start in out:
                continue
            count = run if all(start + j in values for j in range(run)) and start % run == 0 else 1
            idx = b.add(row, b.add(thread, ir.Constant(I32, start)))
            off = b.add(b.mul(idx, ir.Constant(I32, byte_size(elem))), ir.Constant(I32, base))
            for j, v in enumerate(smem_load(lw, off, count, elem)):
                out[start + j] = _widen(lw, v, elem, ct, tf32)
        return out

    a_val = read(ms, run_m, tm, m_size, 0, ea)
    b_val = read(ns, run_n, tn, n_size, size_a, eb)
    new = []
    for r, acc in enumerate(accs):
        x, y = a_val[m_of[r]], b_val[n_of[r]]
        if ct.is_float:
            new.append(intrinsic(b, "fma", [x, y, acc]))
        else:
            new.append(b.add(acc, b.mul(x, y)))
    nxt = b.add(kk, ir.Constant(I32, 1))
    latch = b.block
    for p, v in zip(accs, new):
        p.add_incoming(v, latch)
    kk.add_incoming(nxt, latch)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I32, k_size)), loop, done)
    b.position_at_end(done)
    lw.define(ins.results[0], [casts.convert(b, lw.target, v, ct, ec) for v in new])
