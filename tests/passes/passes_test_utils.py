"""Helpers for pass tests: text in, text out.

`canon(text)` parses and reprints IR so expected text may use readable value names;
`run(text, passes)` verifies, runs the passes through the pass manager (verifying after
each) and returns the printed result."""
from __future__ import annotations

import textwrap
from typing import Sequence, Union

from tegula.ir import parse_ir, print_ir
from tegula.ir.core import Instr, Kernel, Value
from tegula.ir.ops import Op
from tegula.ir.verifier import verify
from tegula.passes import PassContext, run_pipeline


def parse(text: str) -> Kernel:
    k = parse_ir(textwrap.dedent(text))
    verify(k)
    return k


def canon(text: str) -> str:
    return print_ir(parse(text))


def run(text: str, passes: Union[str, Sequence[str]]) -> str:
    k = parse(text)
    k = run_pipeline(k, passes, PassContext(verify=True))
    verify(k)
    return print_ir(k)


def check(text: str, passes: Union[str, Sequence[str]], expected: str) -> None:
    got = run(text, passes)
    want = canon(expected)
    assert got == want, f"\n--- got ---\n{got}\n--- expected ---\n{want}"


def ops(kernel_text: str) -> list[str]:
    """The op names of the top-level instructions of printed IR."""
    k = parse_ir(kernel_text)
    return [ins.op.value for ins in k.body.instrs]


def find(kernel: Kernel, op: Op) -> list[Instr]:
    return [ins for ins in kernel.walk() if ins.op is op]


def by_name(kernel: Kernel, name: str) -> Value:
    """A value by the name it had in the parsed text (`%offs` -> "offs")."""
    for v in kernel.args:
        if v.name == name:
            return v
    for ins in kernel.walk():
        for v in ins.results:
            if v.name == name:
                return v
        for region in ins.regions:
            for v in region.args:
                if v.name == name:
                    return v
    raise KeyError(name)
