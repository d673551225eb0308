"""Alignment versions (`alignment_versions`, a `cuda_tgir` pass before the pipeliner): a
kernel whose loop accesses would be wider vectors if some integer arguments were known
to be multiples of a power of two becomes `if (those arguments are) { the kernel with
that known } else { the kernel as it was }`, decided once per launch.

Why: a caller that compiles a kernel for many values of an integer promises only what
holds for all of them. Inductor's kernels under dynamic shapes get no divisibility for
a size (`ks0`, the row stride of a `[M, K]` operand), so each row segment of a matmul's
tile is copied 2 bytes at a time; `do_not_specialize` does the same to the JIT's own
launches. At run time such sizes are mostly multiples of 8 or 16, and the versioned
kernel then runs the code a kernel specialized for them would (16-byte `cp.async`,
vectorized loads and stores, constant masks over 8 elements). Triton has the same
cliff; nothing is versioned there.

Which arguments: integer arguments whose divisibility is only a promise
(`ArgAttrs.exact_divisibility` false: the JIT's specialized ints measured theirs, so
the branch would never be taken another way) and below 16. Whether to version: the
axis analysis is run with those arguments at 16; if some load or store inside a loop
would get a wider vector (`memory_access`, the width the layout will use), the kernel is
versioned, each argument on the smallest power of two that gives the same widths (a
row stride of halves needs 8: 3000 qualifies). Loads and stores outside loops alone do
not justify doubling the code a kernel compiles to (a dynamic-shape pointwise kernel
runs them once per program); those inside the versioned kernel benefit anyway.

The known divisibility reaches the analysis as `known_multiple_of` hints
(`axis_rules.KNOWN_MULTIPLE_OF`) on the arguments, through which the fast version reads
them. Not versioned: checked mode (plain loads, nothing to widen), kernels with a
warp-specialized loop (its partitions are planned for loops at the kernel's top level).
Both versions' shared memory is allocated as the two branches of an `if` are: one
after the other in the same bytes (`shared_memory`).
"""
from __future__ import annotations

from typing import Iterator, Optional

from ...ir import attrs as A
from ...ir.accessors import memory_operands
from ...ir.builder import Builder
from ...ir.clone import clone_instr
from ...ir.core import ArgAttrs, Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import I1, ScalarType, TileType
from ...passes.axis_analysis import SPECIALIZATION_CAP, axis_info
from ...passes.axis_rules import KNOWN_MULTIPLE_OF
from .memory_accesses import memory_access

_LOOPS = (Op.FOR, Op.WHILE)
_DIVISORS = (2, 4, 8, SPECIALIZATION_CAP)


def _accesses(block: Block, in_loop: bool = False) -> Iterator[tuple[Instr, bool]]:
    """Every load and store of a pointer tile under `block`, and whether a loop holds it."""
    for ins in block.instrs:
        if ins.op in (Op.LOAD, Op.STORE) and isinstance(memory_operands(ins).pointer.type, TileType):
            yield ins, in_loop
        for region in ins.regions:
            yield from _accesses(region, in_loop or ins.op in _LOOPS)


def _candidates(kernel: Kernel) -> list[int]:
    """Positions of the integer arguments whose divisibility is a promise below 16."""
    used = {v for ins in kernel.walk() for v in ins.operands}
    found = []
    for i, arg in enumerate(kernel.args):
        attrs = kernel.arg_attrs[i] if i < len(kernel.arg_attrs) and kernel.arg_attrs[i] else ArgAttrs()
        if (isinstance(arg.type, ScalarType) and arg.type.is_int and arg.type.bits > 1 and arg in used
                and not attrs.exact_divisibility and attrs.divisibility < SPECIALIZATION_CAP):
            found.append(i)
    return found


class _Widths:
    """Vector widths of the kernel's accesses with some arguments' divisibility raised."""

    def __init__(self, kernel: Kernel, accesses: list[Instr], num_warps: int):
        self.kernel, self.accesses, self.num_warps = kernel, accesses, num_warps

    def __call__(self, divisors: dict[int, int]) -> tuple[int, ...]:
        kernel = self.kernel
        saved = kernel.arg_attrs
        attrs = [a or ArgAttrs() for a in saved] + [ArgAttrs()] * (len(kernel.args) - len(saved))
        kernel.arg_attrs = [ArgAttrs(divisibility=max(a.divisibility, divisors.get(i, 1)),
                                     exact_divisibility=a.exact_divisibility) for i, a in enumerate(attrs)]
        try:
            info = axis_info(kernel)
        finally:
            kernel.arg_attrs = saved
        return tuple(memory_access(ins, self.num_warps, info)[1] for ins in self.accesses)


def version_divisors(kernel: Kernel, num_warps: int) -> dict[int, int]:
    """Argument position → the divisor its version tests (empty: not worth a version)."""
    candidates = _candidates(kernel)
    if not candidates:
        return {}
    found = list(_accesses(kernel.body))
    accesses = [ins for ins, _ in found]
    looped = [k for k, (_, in_loop) in enumerate(found) if in_loop]
    widths = _Widths(kernel, accesses, num_warps)
    base = widths({})
    best = widths({i: SPECIALIZATION_CAP for i in candidates})
    if not any(best[k] > base[k] for k in looped):
        return {}
    divisors: dict[int, int] = {}
    for i in candidates:
        others = {j: SPECIALIZATION_CAP for j in candidates if j != i}
        if widths(others) == best:
            continue  # the widths do not depend on it
        divisors[i] = next(d for d in _DIVISORS if d == SPECIALIZATION_CAP or widths({**others, i: d}) == best)
    if widths(divisors) != best:  # the arguments' smallest divisors do not combine
        divisors = {i: SPECIALIZATION_CAP for i in divisors}
    return divisors


def _versioned(kernel: Kernel, divisors: dict[int, int]) -> None:
    """`kernel`'s body as `if (every argument a multiple of its divisor) { copy } else { body }`."""
    body = kernel.body
    returns, code = body.instrs[-1], body.instrs[:-1]
    head, fast = Block(), Block()
    test, hints = Builder(head), Builder(fast)
    mapping: dict[Value, Value] = {}
    condition: Optional[Value] = None
    with test.location(kernel.loc), hints.location(kernel.loc):
        for i, d in sorted(divisors.items()):
            arg = kernel.args[i]
            low_bits = test.op1(Op.AND, arg, test.constant(d - 1, arg.type))
            aligned = test.op1(Op.EQ, low_bits, test.constant(0, arg.type), type=I1)
            condition = aligned if condition is None else test.op1(Op.AND, condition, aligned)
            mapping[arg] = hints.op1(Op.HINT, arg, attrs=A.HintAttrs(KNOWN_MULTIPLE_OF, (d,)), type=arg.type)
        fast.instrs += [clone_instr(ins, mapping) for ins in code]
        hints.yield_([])
        slow = Block(instrs=code)
        Builder(slow).yield_([])
        test.create(Op.IF, [condition], result_types=[], regions=[fast, slow])
    body.instrs = head.instrs + [returns]


def alignment_versions(kernel: Kernel, num_warps: int, checked: bool) -> Kernel:
    """Version `kernel` on its promised-only integer arguments' alignment where its loops'
    accesses would be wider for it (see the module docstring). In place."""
    if checked or not kernel.body.instrs or kernel.body.instrs[-1].op is not Op.RETURN:
        return kernel
    if any(ins.op is Op.FOR and getattr(ins.attrs, "warp_specialize", False) for ins in kernel.walk()):
        return kernel
    divisors = version_divisors(kernel, num_warps)
    if divisors:
        _versioned(kernel, divisors)
    return kernel
