"""What a program can ask about the hardware running it (Triton's `tl.extra.cuda`
`smid`, `globaltimer`, `num_threads`, `num_warps`).

`smid()` is the index of the multiprocessor running the program (int32; PTX `%smid`),
`globaltimer()` a nanosecond clock (int64; PTX `%globaltimer`), read anew at each call.
`num_warps()` and `num_threads()` (= 32 × num_warps) are constexprs of the launch's
`num_warps`, usable as tile sizes (`tl.arange(0, tl.extra.cuda.num_threads())`).

The host backends give them host meanings: `smid()` is 0 (one program at a time per
host thread, no multiprocessors), `globaltimer()` the host's monotonic clock in
nanoseconds, and the constexprs the launch's num_warps as on the GPU (the host backends
otherwise ignore num_warps, so a kernel reading them compiles once per value).
"""
from __future__ import annotations

from .... import ir
from ...constexpr import constexpr
from ...core import builtin
from ...dtypes import int32, int64

WARP_SIZE = 32


@builtin
def smid(sem):
    """The id of the streaming multiprocessor running this program (an int32 scalar)."""
    return sem.emit_tensor(ir.Op.SMID, type=int32)


@builtin
def globaltimer(sem):
    """The GPU's global nanosecond timer (an int64 scalar); every call reads it again."""
    return sem.emit_tensor(ir.Op.GLOBALTIMER, type=int64)


def _num_warps(sem) -> int:
    return int(getattr(sem.options, "num_warps", None) or 4)


@builtin
def num_warps(sem):
    """The launch's num_warps, as a constexpr."""
    return constexpr(_num_warps(sem))


@builtin
def num_threads(sem):
    """The threads of one program, 32 × num_warps, as a constexpr."""
    return constexpr(_num_warps(sem) * WARP_SIZE)
