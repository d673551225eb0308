"""Checked mode's pointer provenance (`checked.pointer_origins`) reaches its fixed point
however many sweeps the loop-carried values need: a pointer that may come from two
arguments is never attributed to one (its accesses would be checked against the wrong
extent)."""
from __future__ import annotations

import os

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.checked import pointer_origins
from tegula.ir.ops import Op
from tegula.runtime.source import ASTSource


@tegula.jit
def _rotating_pointers(a_ptr, b_ptr, n):
    # q0 only becomes a pointer into `a` after ten trips round the loop
    q0 = q1 = q2 = q3 = q4 = q5 = q6 = q7 = q8 = q9 = b_ptr
    for _ in range(n):
        q0, q1, q2, q3, q4, q5, q6, q7, q8, q9 = q1, q2, q3, q4, q5, q6, q7, q8, q9, a_ptr
    tl.store(q0, 1.0)
    tl.store(b_ptr, 2.0)


def test_origins_of_a_slow_loop_carried_chain_are_mixed():
    os.environ["TEGULA_ALWAYS_COMPILE"] = "1"
    try:
        kernel = tegula.compile(ASTSource(_rotating_pointers, {"a_ptr": "*fp32", "b_ptr": "*fp32", "n": "i32"}),
                                target=GPUTarget("cuda", 90, 32)).ir
    finally:
        del os.environ["TEGULA_ALWAYS_COMPILE"]
    origins = pointer_origins(kernel)
    stores = [ins for ins in kernel.walk() if ins.op is Op.STORE]
    assert len(stores) == 2
    assert stores[0].operands[0] not in origins       # a or b: unchecked, never "b"
    assert origins[stores[1].operands[0]] == 1        # b_ptr itself
