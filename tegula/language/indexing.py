"""`tl.gather` and `tl.histogram` (Triton 3.6 names, arguments and checks).

- `gather(src, index, axis)`: out[..., i, ...] = src[..., index[..., i, ...], ...], one
  IR op (`gather`) that every backend lowers as what it is: numpy's `take_along_axis`
  in the interpreter, a load from the source's buffer at the flat index with the axis
  coordinate replaced on the CPU, and on the GPU a trip through shared memory (each
  thread writes its source elements at their flat indices, a CTA barrier, each thread
  reads its outputs at the computed indices, in the index's layout). The work is
  O(index size + source size) per tile: Triton's own test (a [128, 64] source, a
  [256, 64] index) compiles in milliseconds, where the former composition of
  comparisons and a sum (O(index size x source length)) gave megabytes of PTX. Floats
  come back bit for bit (-0.0 and NaN payloads included). An index outside
  [0, src.shape[axis]) gives 0 (false for bools) on every backend, and never reads
  outside the source (Triton leaves it undefined).
- `histogram(input, num_bins, mask=None)`: int32 counts of each value 0..num_bins-1 in
  a 1-D integer tensor, built from comparisons against the bin range and a sum
  (O(size x bins) work per tile, fine at tile sizes; Triton uses shared-memory
  atomics); values outside the bins and masked-off elements are not counted.
"""
from __future__ import annotations

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .constexpr import unwrap_constexpr as U
from .core import builtin
from .semantic_arith import optional_tensor
from .tensor import tensor


def _range_along(sem, n: int, axis: int, rank: int, start: int = 0) -> tensor:
    """arange(start, start + n) shaped [1, ..., n (at `axis`), ..., 1]."""
    r = sem.arange(start, start + n)
    return sem.reshape(r, [1] * axis + [n] + [1] * (rank - 1 - axis)) if rank > 1 else r


@builtin
def gather(sem, src, index, axis):
    """Gather from `src` along `axis` at the positions in `index`."""
    src, index, axis = sem.to_tensor(U(src)), sem.to_tensor(U(index)), int(U(axis))
    if not index.dtype.is_int():
        raise ValueError(f"tl.gather: index must be an integer tensor, got {index.dtype}")
    shape, ishape = sem.shape_of(src), sem.shape_of(index)
    rank = len(shape)
    if len(ishape) != rank or rank == 0:
        raise ValueError(f"tl.gather: source and index tensors must have the same rank, got shapes "
                         f"{list(shape)} and {list(ishape)}")
    if not -rank <= axis < rank:
        raise ValueError(f"tl.gather: axis {axis} must be < source rank ({rank})")
    axis %= rank
    for d in range(rank):
        if d != axis and shape[d] != ishape[d]:
            raise ValueError(f"tl.gather: index dim {d} ({ishape[d]}) must match the source dim ({shape[d]})")
    if src.dtype.is_ptr():
        raise ValueError("tl.gather: the source must be a tensor of numbers, not of pointers")
    out_type = T.block_type(src.dtype, list(ishape))
    return sem.emit_tensor(ir.Op.GATHER, src, index, attrs=A.GatherAttrs(axis), type=out_type)


@builtin
def histogram(sem, input, num_bins, mask=None):
    """int32 counts of the values 0 .. num_bins-1 in the 1-D integer tensor `input`."""
    from .reductions import sum as tl_sum

    x, n_bins = sem.to_tensor(U(input)), int(U(num_bins))
    mask = optional_tensor(sem, mask)
    if len(sem.shape_of(x)) != 1:
        raise ValueError("tl.histogram only supports 1D input")
    if not x.dtype.is_int():
        raise ValueError(f"tl.histogram only supports integer input, got {x.dtype}")
    hit = sem.equal(sem.expand_dims(x, 1), _range_along(sem, n_bins, 1, 2))
    if mask is not None:
        if not mask.dtype.is_bool():
            raise ValueError("Mask must have boolean scalar type")
        mask = sem.broadcast_to_shape(mask, sem.shape_of(x))
        hit = sem.and_(hit, sem.expand_dims(mask, 1))
    return tl_sum.impl(sem, sem.cast(hit, T.int32), 0)
