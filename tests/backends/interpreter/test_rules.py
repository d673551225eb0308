"""Every op of the IR has an interpreter rule, and the all-ops sample kernel compiles."""
from __future__ import annotations

import sys
from pathlib import Path

from tegula.backends.interpreter import INTERPRETER_RULES, compile_kernel, has_rule
from tegula.ir.ops import Op


def test_every_op_has_an_interpreter_rule():
    missing = [op.value for op in Op if not has_rule(op)]
    assert missing == [], f"ops without an interpreter rule: {missing}"


def test_rule_table_holds_only_ops():
    assert set(INTERPRETER_RULES) <= set(Op)
    assert all(callable(fn) for fn in INTERPRETER_RULES.values())


def test_all_ops_sample_kernel_compiles():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ir"))
    try:
        from ir_test_kernels import build_all_ops_kernel
    finally:
        sys.path.pop(0)
    kernel = build_all_ops_kernel(inline_asm=False)  # PTX: a compile error here (test_inline_asm.py)
    used = {ins.op for ins in kernel.walk()}
    assert used >= set(Op) - {Op.YIELD, Op.CONDITION, Op.RETURN, Op.INLINE_ASM}
    program = compile_kernel(kernel, debug=True)
    assert program.kernel is kernel
