"""Loops of a known trip count (`passes.ir_utils.static_trip_count`): the pipeliner gives
them no more ring slots than they have iterations, and leaves a single-iteration loop
alone — fla's loops over `tl.cdiv(V, BV)` value blocks with BV = V, whose rings took
224 KB for one iteration in chunk_bwd_kernel_dqkwg (one CTA an SM). Checked on the tgir
(ring depths) and on the emulator at capability 80 and 90 against float64 products.
A loop of one iteration is inlined by `canonicalize` before any of this."""
from __future__ import annotations

import numpy as np
import pytest
from test_pipeline_loops import tir_opt

import tegula
import tegula.language as tl
from tegula.backends.cuda.emulator import EmulatedKernel
from tegula.ir.ops import Op


@tegula.jit
def blocks_of_v(a_ptr, b_ptr, out_ptr, BT: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    """out = a @ b summed over V in blocks of BV: a [BT, V], b [V, BT]."""
    rt, rv = tl.arange(0, BT), tl.arange(0, BV)
    acc = tl.zeros([BT, BT], dtype=tl.float32)
    for i in range(tl.cdiv(V, BV)):
        o_v = i * BV + rv
        a = tl.load(a_ptr + rt[:, None] * V + o_v[None, :])
        b = tl.load(b_ptr + o_v[:, None] * BT + rt[None, :])
        acc += tl.dot(a, b)
    tl.store(out_ptr + rt[:, None] * BT + rt[None, :], acc)


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp32", "BT": "constexpr", "V": "constexpr",
       "BV": "constexpr"}


def _kernel(V, BV):
    return tir_opt(blocks_of_v, SIG, {"BT": 64, "V": V, "BV": BV}, attrs={"a_ptr": 16, "b_ptr": 16, "out_ptr": 16})


@pytest.mark.parametrize("V,BV,slots", [(64, 64, None), (128, 64, 2), (256, 64, 3)])
@pytest.mark.parametrize("capability", [80, 90])
def test_ring_depth_follows_the_trip_count(V, BV, slots, capability):
    """3 stages asked: two iterations get two slots, four keep three. One iteration is
    no loop at all (canonicalize inlines it): its dot is the kernel body's, whose
    operands sm_90a stages once each (one slot, `stage_operands`), sm_80 reads from
    registers."""
    kernel = _kernel(V, BV)
    assert sum(i.op is Op.FOR for i in kernel.walk()) == (0 if slots is None else 1)
    ek = EmulatedKernel(kernel, 4, capability=capability, num_stages=3)
    rings = [i.results[0].type.shape[0] for i in ek.lowering.kernel.walk()
             if i.op is Op.LOCAL_ALLOC and any(u.op is Op.ASYNC_COPY and u.operands[0] is i.results[0]
                                               for u in ek.lowering.kernel.walk())]
    staged_once = [1, 1] if capability >= 90 else []
    assert rings == (staged_once if slots is None else [slots, slots]), rings
    rng = np.random.default_rng(V + capability)
    a = rng.uniform(-1, 1, (64, V)).astype(np.float16)
    b = rng.uniform(-1, 1, (V, 64)).astype(np.float16)
    out = np.full((64, 64), np.nan, np.float32)
    ek.run((1, 1, 1), [a, b, out])
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)
