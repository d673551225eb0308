"""The CPU lowering of control flow (a mixin of `lower.CpuLowering`): `for`, `if` and
`while`, whose carried and result values live in slots — a tile buffer or a scalar
stack slot each — assigned at every yield (all values read first: a yield may permute
them) and bound back to the values after the branch or iteration.
"""
from __future__ import annotations

from typing import Optional

import llvmlite.ir as ir

from ...ir.accessors import for_bounds, for_inits
from ...ir.core import Block, Instr, Value
from ...ir.ops import Op
from ...ir.types import element_of, shape_of
from ..llvm.types import llvm_type
from .tiles import Tile, numel


class ControlFlow:
    def _slots(self, values: list[Value]) -> list:
        """Storage for carried / result values: a tile buffer or a scalar stack slot."""
        return [self.new_tile(v.type) if shape_of(v.type) else self.alloca_b.alloca(llvm_type(element_of(v.type)))
                for v in values]

    def _assign(self, slots: list, values: list[Value]) -> None:
        """slots := values, reading all values first (a yield may permute the carried ones):
        a value computed element by element, or held in another slot's buffer, goes
        through a temporary; a buffer of its own is copied from directly, and a value
        already in its slot (an accumulator updated in place) not at all."""
        b = self.b
        slot_bufs = {id(s.buf) for s in slots if isinstance(s, Tile)}
        temps = []
        for s, v in zip(slots, values):
            x = self.env[id(v)]
            if not isinstance(s, Tile):
                temps.append(x)
            elif isinstance(x, Tile) and x.buf is s.buf:
                temps.append(None)
            elif isinstance(x, Tile) and id(x.buf) not in slot_bufs:
                temps.append(x)
            else:
                t = self.new_tile(v.type)
                self.loop(numel(v.type), lambda i, t=t, v=v: b.store(self.get(v, i), self.elem_ptr(t, i)))
                temps.append(t)
        for s, t, v in zip(slots, temps, values):
            if t is None:
                continue
            if isinstance(s, Tile):
                self.loop(numel(v.type), lambda i, s=s, t=t: b.store(b.load(self.elem_ptr(t, i), typ=t.elem),
                                                                   self.elem_ptr(s, i)))
            else:
                b.store(t, s)

    def _bind(self, values: list[Value], slots: list) -> None:
        for v, s in zip(values, slots):
            self.env[id(v)] = Tile(s.buf, v.type) if isinstance(s, Tile) else self.b.load(s)

    def _origins(self, dst: list[Value], src: list[Value]) -> None:
        for d, s in zip(dst, src):
            self.origin[id(d)] = self.origin.get(id(s))

    def _region(self, region: Block, slots: list) -> Optional[list[Value]]:
        """Lower a region's ops; its yield assigns `slots`. Returns the yielded values
        (None when the region ends, e.g. returns, before its yield)."""
        for x in region.instrs:
            if self.b.block.is_terminated:
                return None
            if x.op is Op.YIELD:
                self._assign(slots, x.operands)
                return x.operands
            self.instr(x)
        return None

    def op_for(self, ins: Instr) -> None:
        b = self.b
        lb, ub, st = (self.get(o) for o in for_bounds(ins))
        inits = for_inits(ins)
        body = ins.regions[0]
        iv, carried = body.args[0], body.args[1:]
        self._origins(carried, inits)
        self._origins(ins.results, inits)
        slots = self._slots(list(inits))
        self._assign(slots, list(inits))
        self.runtime_error(ins, b.icmp_signed("==", st, ir.Constant(st.type, 0)), "runtime",
                           "for loop with a step of 0")
        iv_slot = self.alloca_b.alloca(lb.type)
        b.store(lb, iv_slot)
        head = self.fn.append_basic_block("for")
        body_bb = self.fn.append_basic_block("for.body")
        after = self.fn.append_basic_block("for.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.load(iv_slot)
        signed = element_of(ins.operands[0].type).is_signed
        cmp = b.icmp_signed if signed else b.icmp_unsigned
        # Python range semantics for either sign of the step
        up = cmp(">", st, ir.Constant(st.type, 0))
        go = b.select(up, cmp("<", i, ub), cmp(">", i, ub))
        b.cbranch(go, body_bb, after)
        b.position_at_end(body_bb)
        self.env[id(iv)] = i
        self._bind(carried, slots)
        self._region(body, slots)
        if not b.block.is_terminated:
            b.store(b.add(b.load(iv_slot), st), iv_slot)
            b.branch(head)
        b.position_at_end(after)
        self._bind(ins.results, slots)

    def op_if(self, ins: Instr) -> None:
        b = self.b
        cond = self.get(ins.operands[0])
        slots = self._slots(list(ins.results))
        then_bb = self.fn.append_basic_block("then")
        else_bb = self.fn.append_basic_block("else")
        after = self.fn.append_basic_block("endif")
        b.cbranch(cond, then_bb, else_bb)
        yields = []
        for bb, region in zip((then_bb, else_bb), list(ins.regions) + [None]):
            b.position_at_end(bb)
            if region is not None:
                yielded = self._region(region, slots)
                if yielded is not None:
                    yields.append(yielded)
            if not b.block.is_terminated:
                b.branch(after)
        b.position_at_end(after)
        for k, r in enumerate(ins.results):
            origins = {self.origin.get(id(y[k])) for y in yields}
            self.origin[id(r)] = origins.pop() if len(origins) == 1 else None
        self._bind(ins.results, slots)

    def op_while(self, ins: Instr) -> None:
        b = self.b
        before, after = ins.regions
        inits = list(ins.operands)
        self._origins(before.args, inits)
        self._origins(after.args, inits)
        self._origins(ins.results, inits)
        slots = self._slots(inits)
        self._assign(slots, inits)
        out_slots = self._slots(list(ins.results))
        head = self.fn.append_basic_block("while")
        body_bb = self.fn.append_basic_block("while.body")
        end = self.fn.append_basic_block("while.end")
        b.branch(head)
        b.position_at_end(head)
        self._bind(before.args, slots)
        for x in before.instrs:
            if b.block.is_terminated:
                break
            if x.op is Op.CONDITION:
                cond = self.get(x.operands[0])
                self._assign(out_slots, x.operands[1:])
                b.cbranch(cond, body_bb, end)
                break
            self.instr(x)
        b.position_at_end(body_bb)
        self._bind(after.args, out_slots)
        self._region(after, slots)
        if not b.block.is_terminated:
            b.branch(head)
        b.position_at_end(end)
        self._bind(ins.results, out_slots)
