"""Occupancy from a kernel's resources, and the register budget that gains a CTA.

How many CTAs of a kernel fit on one SM is the least of three limits: registers (64K
per SM, allocated per warp in units of 256, i.e. per thread rounded up to a multiple
of 8), shared memory (the kernel's bytes plus the 1 KB each CTA reserves) and threads
(and a cap on CTAs). A kernel a few registers over a threshold loses a whole CTA: the
attention forward with 8 warps at 130 registers ran one CTA per SM where 128 would have
given two, at 0.64x Triton on the H100. `register_target` finds such a case; the
compiler then re-runs ptxas with that register cap and keeps the result only when it
did not spill (compiler.py). The other way round, `register_file_share` is what one CTA
may use when ptxas spilled below it (compiler.py re-runs ptxas with that cap), and
`shared_memory_budget` what each CTA may use when shared memory, not registers, sets
how many reside (ptxas does not know the dynamic shared memory and squeezes the code
for CTAs that never come).
"""
from __future__ import annotations

from typing import Optional

REGISTERS_PER_SM = 65536
MAX_REGISTERS_PER_THREAD = 255
# per SM: shared memory bytes, resident threads, resident CTAs (CUDA occupancy tables)
_SM = {80: (167936, 2048, 32), 86: (102400, 1536, 16), 87: (167936, 2048, 32), 89: (102400, 1536, 24),
       90: (233472, 2048, 32)}
_RESERVED_SHARED_PER_CTA = 1024
# a cap at most this fraction below what ptxas chose unconstrained: further down the
# code it produces without spilling is more often slower than the CTA it gains. (1/8
# until the library's causal D64 attention forward, 8 warps, drifted from 127 registers
# to 147-153 with the same instructions in another order: one CTA per SM where 128 give
# two, 387 -> 316-320 TFLOP/s on an H200.)
_MAX_REGISTER_CUT = 1 / 6
# only from one or two resident CTAs, where one more is a large share of the warps that
# hide latency; at 7 -> 8 the gain is small and the capped code may be slower
_MAX_CTAS_TO_GROW = 2


def _sm(capability: int) -> tuple[int, int, int]:
    return _SM.get(capability, _SM[90] if capability > 90 else _SM[80])


def _allocated(regs: int) -> int:
    return -(-max(regs, 1) // 8) * 8


def ctas_per_sm(regs: int, threads: int, shared: int, capability: int) -> int:
    """Resident CTAs per SM of a kernel with these resources (0: it does not fit)."""
    sm_shared, sm_threads, sm_ctas = _sm(capability)
    by_regs = REGISTERS_PER_SM // (_allocated(regs) * threads)
    by_shared = sm_shared // (shared + _RESERVED_SHARED_PER_CTA)
    return min(by_regs, by_shared, sm_threads // threads, sm_ctas)


def register_target(regs: int, threads: int, shared: int, capability: int) -> Optional[int]:
    """The per-thread register cap that fits one more CTA per SM, when registers are
    what limits occupancy to one or two CTAs and the cap is within `_MAX_REGISTER_CUT`
    of `regs`; None otherwise."""
    sm_shared, sm_threads, sm_ctas = _sm(capability)
    now = ctas_per_sm(regs, threads, shared, capability)
    other_limits = min(sm_shared // (shared + _RESERVED_SHARED_PER_CTA), sm_threads // threads, sm_ctas)
    if now >= other_limits or now > _MAX_CTAS_TO_GROW:
        return None
    target = (REGISTERS_PER_SM // ((now + 1) * threads)) // 8 * 8
    target = min(target, MAX_REGISTERS_PER_THREAD)
    if target <= 0 or target >= regs or regs - target > regs * _MAX_REGISTER_CUT:
        return None
    return target


def shared_memory_budget(regs: int, threads: int, shared: int, capability: int) -> Optional[int]:
    """The registers per thread each CTA may use when as many CTAs reside as shared
    memory allows, where shared memory is what limits them and `regs` would let more
    reside: ptxas cannot see the dynamic shared memory, so left alone it aims at an
    occupancy registers allow and shared memory never will, and squeezes the code for
    it. None otherwise: registers already limit occupancy, or the budget gives nothing.

    A 64x128x64 4-stage matmul with 4 warps (96 KB of rings: two CTAs per SM) got 128
    registers, four CTAs' worth; allowed two CTAs' worth it took 154, and ran 0.90 ->
    0.97x Triton on an H200 (4096^3)."""
    sm_shared, sm_threads, sm_ctas = _sm(capability)
    by_shared = sm_shared // (shared + _RESERVED_SHARED_PER_CTA)
    if not 1 <= by_shared < min(sm_threads // threads, sm_ctas):
        return None  # shared memory is not what limits (an elementwise kernel: the threads)
    if REGISTERS_PER_SM // (_allocated(regs) * threads) <= by_shared:
        return None
    budget = min(REGISTERS_PER_SM // (by_shared * threads) // 8 * 8, MAX_REGISTERS_PER_THREAD)
    return budget if budget > _allocated(regs) else None


def shared_memory_headroom(threads: int, shared: int, capability: int, capacity: int) -> int:
    """The most shared memory a CTA of `threads` threads using `shared` bytes may take
    (at most `capacity`, the per-CTA limit) while as many CTAs fit on an SM as fit now
    by shared memory, threads and the CTA cap (registers are not known yet: they can
    only lower the count): scratch placed there to save barriers costs no occupancy."""
    sm_shared, sm_threads, sm_ctas = _sm(capability)
    now = min(sm_shared // (shared + _RESERVED_SHARED_PER_CTA), sm_threads // threads, sm_ctas)
    if now < 1:
        return shared
    return max(shared, min(capacity, sm_shared // now - _RESERVED_SHARED_PER_CTA))


def register_file_share(threads: int) -> int:
    """The most registers per thread one CTA of `threads` threads may use (a multiple of
    8, at most 255): what a kernel that spills should be allowed before it spills.
    ptxas left alone may stop well short: attention's D128 dK/dV kernel with 8 warps,
    compiled with a run-time stride along the head dimension (not specialized to 1, so
    its copies are per element and its dots on mma.sync), used 128 registers and
    spilled 5728 bytes; given `.maxnreg 255`, 255 and 2656."""
    return min(REGISTERS_PER_SM // threads // 8 * 8, MAX_REGISTERS_PER_THREAD)
