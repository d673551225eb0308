"""Which 16-byte `cp.async` copies go through L1 (`cp.async.ca`) rather than around it
(`cp.async.cg`, the default).

A pipelined tile copy lands in shared memory and is not read from global memory again,
so L1 is normally only in the way. The exception is a tile whose rows start in the
middle of a 32-byte sector: a row-major fp16 matrix with 3000 columns has rows 6000
bytes apart, 16 bytes past a multiple of 32, so every other row's 128-byte run of a
64-wide K block begins and ends inside a sector it shares with the neighbouring K
blocks. Around L1, each K block fetches those sectors from L2 again (5 sectors for 4
on half the rows, two 128-byte lines for one on most); through L1, the sector fetched
for one K block is usually still there for the next. Measured on an H200 (the pointer
matmul, 128×128×64, 4 stages, 4 warps; benchmarks/copy_caching_gpu.py): 3000³ fp16
+15% with this rule (A's copies through L1), +17% with every copy; 3008³ and 4096³,
whose rows are line-aligned, unchanged with the rule and 8-11% slower with every copy —
so only copies whose rows are likely mid-sector take it.

"Likely mid-sector" needs evidence: a divisibility below the specialization's cap is
exact (a row stride of 3000 halves is divisible by 8 and not by 16), while one at the cap
says only "16 or more" (a pointer is never proved more than 16-byte aligned, and an
8-bit matrix's stride of 8192 is known no better than a 3000-column fp16 one's). So the
decision re-runs the axis analysis with every capped argument taken to be divisible by
`LIKELY_DIVISIBILITY` (allocators align arrays, sizes are round) and asks whether a
copy's runs still start off a sector boundary; only copies that point into a kernel
argument are judged (a pointer loaded from memory, as a grouped GEMM's, has no such
evidence). The assumption only picks a cache policy: both copy the same bytes.
"""
from __future__ import annotations

from ...config import knobs
from ...ir.accessors import memory_operands
from ...ir.core import Instr, Kernel
from ...ir.ops import Op
from ...passes import contiguity_order
from ...passes.axis_analysis import axis_info
from .checked import pointer_origins

# torch's, CuPy's and numpy's allocators hand out blocks aligned to at least 256 bytes
LIKELY_DIVISIBILITY = 256
SECTOR_BYTES = 32


def copies_through_l1(kernel: Kernel) -> set[Instr]:
    """The `async_copy` ops of `kernel` whose 16-byte copies should use `cp.async.ca`
    (`knobs.cp_async_l1`: unset or auto, those whose runs likely start mid-sector; 1,
    every one; 0, none)."""
    copies = [ins for ins in kernel.walk() if ins.op is Op.ASYNC_COPY]
    asked = knobs.cp_async_l1
    if not copies or asked is False:
        return set()
    if asked is True:
        return set(copies)
    info = axis_info(kernel, likely_divisibility=LIKELY_DIVISIBILITY)
    origins = pointer_origins(kernel)
    return {ins for ins in copies
            if memory_operands(ins).pointer in origins and _runs_start_mid_sector(ins, info)}


def _runs_start_mid_sector(ins: Instr, info) -> bool:
    """Whether the copy's contiguous runs, each a sector long or more, start at byte
    addresses that are (likely) not multiples of a sector."""
    ptr = memory_operands(ins).pointer
    a = info.get(ptr)
    if a is None or a.rank == 0:
        return False
    d = contiguity_order(ptr, info)[0]
    elem_bytes = ins.operands[0].type.element.bytes
    return a.contiguity[d] * elem_bytes >= SECTOR_BYTES and a.divisibility[d] < SECTOR_BYTES
