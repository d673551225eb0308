"""Named operand access (`ir.accessors`) agrees with the op layouts the verifier checks."""
from __future__ import annotations

from ir_test_kernels import build_all_ops_kernel

from tegula.ir.accessors import for_bounds, for_inits, for_iter_args, for_iv, for_yields, memory_operands
from tegula.ir.ops import Op


def test_memory_operands_by_role():
    k = build_all_ops_kernel()
    seen = set()
    for ins in k.walk():
        if ins.op not in (Op.LOAD, Op.STORE, Op.ATOMIC_RMW, Op.ATOMIC_CAS, Op.ASYNC_COPY):
            continue
        seen.add(ins.op)
        parts = memory_operands(ins)
        named = [parts.buffer, parts.slot, parts.pointer, parts.compare, parts.value, parts.mask, parts.other]
        named = [v for v in named if v is not None]
        assert sorted(map(id, named)) == sorted(map(id, ins.operands)), ins
        assert parts.pointer.type is not None
        if getattr(ins.attrs, "has_mask", False):
            assert parts.mask is not None and str(parts.mask.type).startswith(("i1", "tile<"))
    assert seen == {Op.LOAD, Op.STORE, Op.ATOMIC_RMW, Op.ATOMIC_CAS, Op.ASYNC_COPY}


def test_for_parts():
    k = build_all_ops_kernel()
    loops = [ins for ins in k.walk() if ins.op is Op.FOR]
    assert loops
    for loop in loops:
        assert list(for_bounds(loop)) + for_inits(loop) == loop.operands
        assert [for_iv(loop)] + for_iter_args(loop) == loop.regions[0].args
        assert len(for_yields(loop)) == len(for_inits(loop)) == len(loop.results)
