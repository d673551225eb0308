"""The rule of `gather` (`tl.gather`): numpy's `take_along_axis`, the definition the
compiled backends reproduce. An index outside [0, src.shape[axis]) reads position 0
and its result is then replaced by zero (false for bools), so no index faults and
the result does not depend on what lies past the source."""
from __future__ import annotations

import numpy as np

from ...ir.core import Instr
from ...ir.ops import Op
from .compiler import Compiler
from .registry import Step, rule


def gathered(src: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
    """out[..i..] = src[..index[..i..]..] along `axis`, 0 where the index is out of range."""
    index = np.asarray(index)
    inside = (index >= 0) & (index < src.shape[axis])
    safe = np.where(inside, index, 0).astype(np.intp)
    out = np.take_along_axis(src, safe, axis)
    return np.where(inside, out, np.zeros((), src.dtype))


@rule(Op.GATHER)
def gather(ins: Instr, c: Compiler) -> Step:
    a, i = c.slots(ins.operands)
    o = c.slot(ins.result)
    axis = ins.attrs.axis

    def step(env):
        env[o] = gathered(np.asarray(env[a]), env[i], axis)
    return step
