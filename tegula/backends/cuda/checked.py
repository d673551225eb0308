"""Checked (debug) mode: every load and store is compared against the extent of the
array its pointer came from, and `device_assert` reports instead of trapping.

The kernel gets hidden parameters after its own: an error buffer (`ERROR_WORDS` int64s)
and, per pointer argument, the byte extent of its array. A failing access is masked off
(so it cannot fault) and the first failure of the launch is recorded with an atomic
compare-and-swap: `[kind, site, pid.x, pid.y, pid.z, element offset]`. `site` indexes
`CheckedMode.sites` (kept in the metadata) so the launcher can name the kernel line;
it raises `OutOfBoundsError` / `DeviceAssertionError` after the launch.

Which argument a pointer came from is a static provenance walk (`pointer_origins`):
through addptr, views, selects and joins of one origin, and loop-carried values.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...ir.accessors import for_inits, for_yields
from ...ir.core import Instr, Kernel, Loc, Value
from ...ir.ops import Op
from ...ir.types import PointerType, element_of
from ...passes.dataflow import fixed_point
from ..llvm.types import I32, I64, ptr_type

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

ERROR_WORDS = 8
KIND_LOAD, KIND_STORE, KIND_ASSERT, KIND_ATOMIC = 1, 2, 3, 4
KIND_NAMES = {KIND_LOAD: "load", KIND_STORE: "store", KIND_ASSERT: "assert", KIND_ATOMIC: "atomic"}

_UNKNOWN = object()
_FOLLOW = frozenset({Op.ADDPTR, Op.SPLAT, Op.BROADCAST, Op.EXPAND_DIMS, Op.RESHAPE, Op.PERMUTE,
                     Op.HINT, Op.SPLIT})


def pointer_origins(kernel: Kernel) -> dict[Value, int]:
    """For each pointer value, the index of the kernel argument it points into, when one
    argument is certain (values mixing two arguments are left out, hence unchecked)."""
    # lattice: absent = not known yet (loop back edges), int = that argument, None = mixed
    origin: dict[Value, Optional[int]] = {}
    for i, a in enumerate(kernel.args):
        if isinstance(element_of(a.type), PointerType):
            origin[a] = i
    changed = False

    def meet(vals: list[Value]) -> object:
        got = {origin[v] for v in vals if v in origin}
        if not got:
            return _UNKNOWN
        return got.pop() if len(got) == 1 else None

    def put(v: Value, o: object) -> None:
        nonlocal changed
        if o is _UNKNOWN:
            return
        new = o if v not in origin or origin[v] == o else None
        if v not in origin or origin[v] != new:
            origin[v] = new  # type: ignore[assignment]
            changed = True

    def visit(ins: Instr) -> None:
        if ins.op in _FOLLOW:
            for r in ins.results:
                put(r, meet([ins.operands[0]]))
        elif ins.op is Op.SELECT:
            put(ins.results[0], meet(ins.operands[1:]))
        elif ins.op is Op.JOIN:
            put(ins.results[0], meet(ins.operands))
        elif ins.op is Op.FOR:
            body = ins.regions[0]
            for k, r in enumerate(ins.results):
                o = meet([for_inits(ins)[k], for_yields(ins)[k]])
                put(body.args[k + 1], o)
                put(r, o)
        elif ins.op is Op.IF:
            for k, r in enumerate(ins.results):
                put(r, meet([reg.terminator.operands[k] for reg in ins.regions]))
        elif ins.op is Op.WHILE:
            before, after = ins.regions
            for k, a in enumerate(before.args):
                put(a, meet([ins.operands[k], after.terminator.operands[k]]))
            cond = before.terminator
            for k, r in enumerate(ins.results):
                o = meet([cond.operands[k + 1]])
                put(after.args[k], o)
                put(r, o)

    instrs = list(kernel.walk())

    def sweep() -> bool:
        nonlocal changed
        changed = False
        for ins in instrs:
            visit(ins)
        return changed

    def mixed() -> None:  # sound: an origin not proven is no origin (the access is unchecked)
        for v in list(origin):
            if v not in kernel.args:
                origin[v] = None

    # each value moves down absent -> one argument -> mixed at most once each, so this
    # many sweeps always reach the fixed point
    values = sum(len(ins.results) + sum(len(r.args) for r in ins.regions) for ins in instrs)
    fixed_point(sweep, 2 * values + 2, mixed)
    return {v: o for v, o in origin.items() if o is not None}


class CheckedMode:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.pointer_args = [i for i, a in enumerate(kernel.args)
                             if isinstance(element_of(a.type), PointerType)]
        self.origins = pointer_origins(kernel)
        self.sites: list[tuple[str, Loc, str]] = []  # (kind, location, detail)

    def param_types(self) -> list[ir.Type]:
        return [ptr_type(1)] + [I64] * len(self.pointer_args)

    def bind(self, lw: "KernelLowering", params: list[ir.Value]) -> None:
        self.errbuf = params[0]
        self.errbuf.name = "tegula_errors"
        self.extent = {}
        self.base = {}
        for j, i in enumerate(self.pointer_args):
            params[1 + j].name = f"extent_{i}"
            self.extent[i] = params[1 + j]
            self.base[i] = lw.pb.ptrtoint(lw.fn.args[i], I64)

    def site_records(self) -> list[tuple[str, str, int, int, str]]:
        """The sites as plain tuples `(kind, file, line, col, detail)` (for metadata)."""
        return [(kind, loc.file, loc.line, loc.col, detail) for kind, loc, detail in self.sites]

    def site(self, kind: str, loc: Loc, detail: str = "") -> int:
        self.sites.append((kind, loc, detail))
        return len(self.sites) - 1

    def bounds(self, lw: "KernelLowering", value: Value, ptr: ir.Value,
               nbytes: int) -> Optional[tuple[ir.Value, ir.Value]]:
        """(in-bounds i1, byte offset i64) of an access of `nbytes` at `ptr`, a register
        of pointer value `value`; None when its origin is unknown."""
        o = self.origins.get(value)
        if o is None:
            return None
        b = lw.b
        off = b.sub(b.ptrtoint(ptr, I64), self.base[o])
        end = b.add(off, ir.Constant(I64, nbytes))
        ok = b.and_(b.icmp_signed(">=", off, ir.Constant(I64, 0)),
                    b.icmp_signed("<=", end, self.extent[o]))
        return ok, off

    def report(self, lw: "KernelLowering", kind: int, site: int, fail: ir.Value,
               offset: Optional[ir.Value] = None) -> None:
        """Record the first failure of the launch when `fail` holds. For an access
        (`offset` given), only the lowest failing lane of the warp competes for the
        record, so the element reported is the warp's first outside the array, not
        whichever lane's atomic lands first (the access is converged code: every lane
        takes part in the warp-wide minimum)."""
        b = lw.b
        if offset is not None:
            key = b.select(fail, lw.lane, ir.Constant(I32, 32))
            for d in (16, 8, 4, 2, 1):
                other = lw.dev.shfl_i32(b, "bfly", key, ir.Constant(I32, d))
                key = b.select(b.icmp_unsigned("<", other, key), other, key)
            fail = b.and_(fail, b.icmp_unsigned("==", key, lw.lane))
        with b.if_then(fail, likely=False):
            slot0 = self.errbuf
            res = b.cmpxchg(slot0, ir.Constant(I64, 0), ir.Constant(I64, kind), "monotonic", "monotonic")
            with b.if_then(b.extract_value(res, 1)):
                words = [ir.Constant(I64, site)]
                words += [b.zext(lw.dev.sreg(b, f"ctaid.{a}"), I64) for a in "xyz"]
                words.append(offset if offset is not None else ir.Constant(I64, 0))
                for i, w in enumerate(words, start=1):
                    b.store(w, b.gep(self.errbuf, [ir.Constant(I32, i)], source_etype=I64))
