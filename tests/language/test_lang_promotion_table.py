"""Binary-operator typing checked against a table recorded from Triton 3.6 itself.

`data/triton36_binary_promotion.json` maps each operator to `"<lhs> <rhs>" -> result`:
operands are dtype names (tensors of shape (4,)) or Python literals (`int` 3, `negint`
-3, `bigint` 2**40, `u32int` 2**31+5, `float` 1.5, `bool` True); results are the result
dtype (for `<` the type both operands are compared in) or `ERR:<exception class>`.
It was produced by running Triton 3.6's own semantic layer over every pair.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from lang_helpers import make_sem

import tegula.language as tl

TABLE = json.loads((Path(__file__).parent / "data" / "triton36_binary_promotion.json").read_text())
LITERALS = {"int": 3, "negint": -3, "bigint": 2 ** 40, "u32int": 2 ** 31 + 5, "float": 1.5, "bool": True}


def _operand(sem, name):
    if name in LITERALS:
        return LITERALS[name]
    return sem.full([4], 0, tl.dtype(name))


def _apply(sem, op, a, b):
    if op == "<":
        return sem.binary_op_type_checking(a, sem.to_tensor(b), "<")[0]
    if op == "where":
        return sem.where(sem.full([4], True, tl.int1), a, b)
    fn = {
        "+": lambda: sem.add(a, b, False), "-": lambda: sem.sub(a, b, False),
        "*": lambda: sem.mul(a, b, False),
        "/": lambda: sem.truediv(a, b), "//": lambda: sem.floordiv(a, b), "%": lambda: sem.mod(a, b),
        "&": lambda: sem.and_(a, b), "|": lambda: sem.or_(a, b), "^": lambda: sem.xor_(a, b),
        "<<": lambda: sem.shl(a, b), "maximum": lambda: sem.maximum(a, b),
    }[op]
    return fn()


@pytest.mark.parametrize("op", sorted(TABLE))
def test_matches_triton_36(op):
    mismatches = []
    for key, expected in TABLE[op].items():
        lhs, rhs = key.split(" ")
        sem = make_sem()[0]
        try:
            got = str(_apply(sem, op, _operand(sem, lhs), _operand(sem, rhs)).dtype)
        except (TypeError, ValueError) as e:
            got = "ERR:" + ("TypeError" if isinstance(e, TypeError) else "ValueError")
        if got != expected:
            mismatches.append(f"{lhs} {op} {rhs}: tegula {got}, Triton {expected}")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:40])
