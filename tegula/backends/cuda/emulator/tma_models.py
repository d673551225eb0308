"""Host models of Hopper's bulk tensor copies and the mbarriers they complete on:

- a *tensor map* on the host is 16 int64 words the emulator packs at launch
  (`pack_tensormap`, from the same numbers `tensormaps.encode_args` gives the driver):
  base address, dims and byte stride (innermost first), box, element bytes and kind,
  swizzle and fill. `tensormap_address` is the pointer parameter itself;
- `tma_load` (`cp.async.bulk.tensor.2d...tile.mbarrier::complete_tx::bytes`) completes
  at issue: a callback reads the box at the (signed) coordinates, elements outside
  the tensor read zero (or NaN for the NaN-request fill), and scatters it into shared
  memory through `shared_layouts.nvmma_offsets` — the swizzle the map names, i.e. the
  PTX ISA's tensor-map swizzle pattern, the same function wgmma's model and the
  lowering's slot layouts use — then completes the box's bytes on the mbarrier;
- an *mbarrier* is its 8-byte word in shared memory, updated with compare-and-swap:
  bits 0-15 arrivals per phase, 16-31 arrivals pending, bit 32 the phase parity,
  bits 33-63 the transaction bytes still expected. An arrival or `complete_tx` that
  leaves no arrival and no byte pending completes the phase: the parity flips and the
  arrivals reset. `mbarrier_wait` polls (yielding the CPU) until the phase of the given
  parity has completed, i.e. the current parity differs from it;
- `tma_store` (`cp.async.bulk.tensor.2d.global.shared::cta`) completes at issue: a
  callback gathers the box from shared memory through the same swizzle and writes the
  part inside the tensor; `bulk_commit` and `bulk_wait_read` have nothing to wait for;
- `fence_mbarrier_init` orders nothing on the host (one memory, one proxy).
"""
from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING, Sequence

import llvmlite.ir as ir
import numpy as np

from ...llvm.intrinsics import declare
from ...llvm.types import I32, I64, VOID, ptr_type
from ..shared_layouts import nvmma_offsets
from ..tma import ENCODABLE_BYTES

if TYPE_CHECKING:
    from ..tma import TensorMapSpec
    from .host_device import HostDevice

TENSORMAP_WORDS = 16
_KIND = {"f16": 1, "bf16": 2, "f32": 3, "f8e4m3": 4, "f8e5m2": 4, "i8": 4, "u8": 4}  # 4: bytes (no NaN fill)
_NAN_BITS = {1: 0x7E00, 2: 0x7FC0, 3: 0x7FC00000}
_WORD = {1: (np.uint8, ctypes.c_uint8), 2: (np.uint16, ctypes.c_uint16), 4: (np.uint32, ctypes.c_uint32)}
_COPY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)
_SYMBOL = "tegula_emu_tma_load_2d"
_STORE_SYMBOL = "tegula_emu_tma_store_2d"

_ARRIVALS, _PENDING_SHIFT, _PHASE_BIT, _TX_SHIFT = 0xFFFF, 16, 1 << 32, 33


def pack_tensormap(spec: "TensorMapSpec", base: int, dims: Sequence[int], byte_strides: Sequence[int]) -> np.ndarray:
    """The host model's 128-byte tensor map (what `cuTensorMapEncodeTiled` would encode)."""
    words = np.zeros(TENSORMAP_WORDS, np.int64)
    eb = ENCODABLE_BYTES[spec.element]
    words[:10] = [base, dims[0], dims[1], byte_strides[0], spec.box[0], spec.box[1], eb, _KIND[spec.element],
                  spec.swizzle, int(spec.nan_fill)]
    return words


@functools.lru_cache(maxsize=None)
def _box_offsets(rows: int, cols: int, elem_bytes: int, swizzle: int) -> np.ndarray:
    """Element offset in shared memory of each element of a box (row-major flat index)."""
    layout = nvmma_offsets((rows, cols), elem_bytes, swizzle)
    return np.array([layout(i) for i in range(rows * cols)], np.int64)


def _copy_box(dst: int, tmap: int, c0: int, c1: int) -> None:
    w = [int(x) for x in (ctypes.c_int64 * TENSORMAP_WORDS).from_address(tmap)]
    base, dim0, dim1, stride, box0, box1, eb, kind, swizzle, nan = w[:10]
    fill = _NAN_BITS[kind] if nan else 0
    word, cword = _WORD[eb]
    block = np.full((box1, box0), fill, word)
    cols = c0 + np.arange(box0)
    col_in = (cols >= 0) & (cols < dim0)
    if col_in.any():
        first, count = int(cols[col_in][0]), int(col_in.sum())
        for r in range(box1):
            row = c1 + r
            if 0 <= row < dim1:
                src = (cword * count).from_address(base + row * stride + first * eb)
                block[r, col_in] = np.frombuffer(src, word)
    out = np.frombuffer((cword * (box0 * box1)).from_address(dst), word)
    out[_box_offsets(box1, box0, eb, swizzle)] = block.ravel()


def _store_box(src: int, tmap: int, c0: int, c1: int) -> None:
    """The inverse of `_copy_box`: the box gathered from shared memory through the same
    swizzle, written to the tensor where it lies inside it (TMA clips the rest)."""
    w = [int(x) for x in (ctypes.c_int64 * TENSORMAP_WORDS).from_address(tmap)]
    base, dim0, dim1, stride, box0, box1, eb = w[:7]
    swizzle = w[8]
    word, cword = _WORD[eb]
    box = np.frombuffer((cword * (box0 * box1)).from_address(src), word)
    block = box[_box_offsets(box1, box0, eb, swizzle)].reshape(box1, box0)
    cols = c0 + np.arange(box0)
    col_in = (cols >= 0) & (cols < dim0)
    if not col_in.any():
        return
    first, count = int(cols[col_in][0]), int(col_in.sum())
    for r in range(box1):
        row = c1 + r
        if 0 <= row < dim1:
            dst = np.frombuffer((cword * count).from_address(base + row * stride + first * eb), word)
            dst[:] = block[r, col_in]


@functools.lru_cache(maxsize=None)
def _register_store() -> object:
    """The store callback as a process symbol (kept alive by the cache)."""
    import llvmlite.binding as llvm
    cb = _COPY(_store_box)
    llvm.add_symbol(_STORE_SYMBOL, ctypes.cast(cb, ctypes.c_void_p).value)
    return cb


@functools.lru_cache(maxsize=None)
def _register_copy() -> object:
    """The copy callback as a process symbol the JIT resolves (kept alive by the cache)."""
    import llvmlite.binding as llvm

    cb = _COPY(_copy_box)
    llvm.add_symbol(_SYMBOL, ctypes.cast(cb, ctypes.c_void_p).value)
    return cb


def _c(n: int, ty: ir.Type = I64) -> ir.Constant:
    return ir.Constant(ty, n)


class TmaModels:
    def tensormap_param(self: "HostDevice", module: ir.Module, fn: ir.Function, index: int) -> None:
        return None  # a plain pointer to the packed words

    def tensormap_address(self: "HostDevice", b: ir.IRBuilder, param: ir.Value) -> ir.Value:
        return b.ptrtoint(param, I64)

    def _bar(self: "HostDevice", b: ir.IRBuilder, addr: ir.Value) -> ir.Value:
        return self.shared_ptr(b, addr)

    def _update(self: "HostDevice", b: ir.IRBuilder, addr: ir.Value, arrivals: int, tx: ir.Value) -> None:
        """Atomically: `arrivals` fewer pending, `tx` more bytes expected (negative:
        bytes completed); the phase completes when both reach zero."""
        ptr = self._bar(b, addr)
        head = b.append_basic_block("mbar_cas")
        done = b.append_basic_block("mbar_done")
        b.branch(head)
        b.position_at_end(head)
        old = b.load_atomic(ptr, "seq_cst", 8, typ=I64)
        count = b.and_(old, _c(_ARRIVALS))
        pending = b.sub(b.and_(b.lshr(old, _c(_PENDING_SHIFT)), _c(_ARRIVALS)), _c(arrivals))
        bytes_ = b.add(b.ashr(old, _c(_TX_SHIFT)), tx)
        phase = b.and_(old, _c(_PHASE_BIT))
        complete = b.and_(b.icmp_signed("==", pending, _c(0)), b.icmp_signed("==", bytes_, _c(0)))
        new_pending = b.select(complete, count, pending)
        new_phase = b.select(complete, b.xor(phase, _c(_PHASE_BIT)), phase)
        new = b.or_(b.or_(count, b.shl(new_pending, _c(_PENDING_SHIFT))),
                    b.or_(new_phase, b.shl(bytes_, _c(_TX_SHIFT))))
        res = b.cmpxchg(ptr, old, new, "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(res, 1), done, head)
        b.position_at_end(done)

    def mbarrier_init(self: "HostDevice", b: ir.IRBuilder, addr: ir.Value, count: int) -> None:
        b.atomic_rmw("xchg", self._bar(b, addr), _c(count | count << _PENDING_SHIFT), "seq_cst")

    def fence_mbarrier_init(self: "HostDevice", b: ir.IRBuilder) -> None:
        return None

    def mbarrier_expect_tx(self: "HostDevice", b: ir.IRBuilder, addr: ir.Value, nbytes: int) -> None:
        self._update(b, addr, 1, _c(nbytes))

    def mbarrier_arrive(self: "HostDevice", b: ir.IRBuilder, addr: ir.Value) -> None:
        self._update(b, addr, 1, _c(0))

    def tma_load(self: "HostDevice", b: ir.IRBuilder, dst: ir.Value, tmap: ir.Value, coords: Sequence[ir.Value],
                 bar: ir.Value) -> None:
        _register_copy()
        copy = declare(b.module, _SYMBOL, VOID, [ptr_type(0), ptr_type(0), I32, I32])
        dst_ptr = b.addrspacecast(self.shared_ptr(b, dst), ptr_type(0))
        b.call(copy, [dst_ptr, b.inttoptr(tmap, ptr_type(0)), *coords])
        # the box's bytes: its words 4, 5 and 6 (box0 x box1 x element bytes)
        words = b.inttoptr(tmap, ptr_type(0))
        dims = [b.load(b.gep(words, [ir.Constant(I32, k)], source_etype=I64), typ=I64) for k in (4, 5, 6)]
        nbytes = b.mul(b.mul(dims[0], dims[1]), dims[2])
        self._update(b, bar, 0, b.neg(nbytes))

    def tma_store(self: "HostDevice", b: ir.IRBuilder, src: ir.Value, tmap: ir.Value,
                  coords: Sequence[ir.Value]) -> None:
        _register_store()
        store = declare(b.module, _STORE_SYMBOL, VOID, [ptr_type(0), ptr_type(0), I32, I32])
        src_ptr = b.addrspacecast(self.shared_ptr(b, src), ptr_type(0))
        b.call(store, [src_ptr, b.inttoptr(tmap, ptr_type(0)), *coords])

    def bulk_commit(self: "HostDevice", b: ir.IRBuilder) -> None:
        return None  # the store completed at issue

    def bulk_wait_read(self: "HostDevice", b: ir.IRBuilder, pending: int) -> None:
        return None

    def mbarrier_wait(self: "HostDevice", b: ir.IRBuilder, addr: ir.Value, phase: ir.Value) -> None:
        ptr = self._bar(b, addr)
        want = b.shl(b.zext(b.and_(phase, ir.Constant(I32, 1)), I64), _c(32))
        head = b.append_basic_block("mbar_wait")
        spin = b.append_basic_block("mbar_spin")
        done = b.append_basic_block("mbar_waited")
        b.branch(head)
        b.position_at_end(head)
        word = b.load_atomic(ptr, "seq_cst", 8, typ=I64)
        b.cbranch(b.icmp_unsigned("!=", b.and_(word, _c(_PHASE_BIT)), want), done, spin)
        b.position_at_end(spin)
        b.call(declare(b.module, "sched_yield", I32, []), [])
        b.branch(head)
        b.position_at_end(done)

    def mbarrier_inval(self: "HostDevice", b: ir.IRBuilder, addr: ir.Value) -> None:
        b.atomic_rmw("xchg", self._bar(b, addr), _c(0), "seq_cst")
