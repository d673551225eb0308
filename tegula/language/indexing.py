"""`tl.gather` and `tl.histogram` (Triton 3.6 names, arguments and checks), built from
comparisons against an index range and a sum, so every backend runs them; they cost
O(size × range) work per tile, which is fine at tile sizes (Triton lowers them to
warp shuffles and shared-memory atomics; doing so here is a later optimisation).

- `gather(src, index, axis)`: out[..., i, ...] = src[..., index[..., i, ...], ...]. The
  one element each output picks is summed with zeros in an integer image of its bits,
  so floats come back bit for bit (-0.0 and NaN payloads included). An index outside
  [0, src.shape[axis]) gives 0 (Triton leaves it undefined). When index size x source
  length would exceed the element limit, the source is cut along the axis into pieces
  whose comparisons fit (every shape Triton accepts compiles).
- `histogram(input, num_bins, mask=None)`: int32 counts of each value 0..num_bins-1 in
  a 1-D integer tensor; values outside the bins and masked-off elements are not
  counted.
"""
from __future__ import annotations

from . import dtypes as T
from .constexpr import unwrap_constexpr as U
from .core import builtin
from .semantic_arith import optional_tensor
from .tensor import tensor


def _range_along(sem, n: int, axis: int, rank: int, start: int = 0) -> tensor:
    """arange(start, start + n) shaped [1, ..., n (at `axis`), ..., 1]."""
    r = sem.arange(start, start + n)
    return sem.reshape(r, [1] * axis + [n] + [1] * (rank - 1 - axis)) if rank > 1 else r


def _halves(sem, t: tensor, axis: int) -> tuple[tensor, tensor]:
    """`t` cut in two along `axis` (first and second half), with reshape, permute, split."""
    shape = list(sem.shape_of(t))
    r = sem.reshape(t, shape[:axis] + [2, shape[axis] // 2] + shape[axis + 1:])
    r = sem.permute(r, [d for d in range(len(shape) + 1) if d != axis] + [axis])
    return sem.split(r)


def _pieces(sem, t: tensor, axis: int, count: int) -> list[tensor]:
    """`t` cut into `count` (a power of two) equal pieces along `axis`, in order."""
    pieces = [t]
    while len(pieces) < count:
        pieces = [h for p in pieces for h in _halves(sem, p, axis)]
    return pieces


@builtin
def gather(sem, src, index, axis):
    """Gather from `src` along `axis` at the positions in `index`."""
    from .reductions import sum as tl_sum

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
    elem = src.dtype
    # bools travel as 0/1 bytes, everything else as the unsigned int of its width
    image_type = T.uint8 if elem == T.int1 else T.get_int_dtype(elem.primitive_bitwidth, False)
    image = sem.cast(src, image_type) if elem == T.int1 else sem.bitcast(src, image_type)
    # The comparison tile is (index shape) x (source positions): cut the source along
    # `axis` into pieces small enough for it to stay within the element limit; each
    # output element is found in exactly one piece, so the pieces' results are OR-ed.
    n_index = 1
    for d in ishape:
        n_index *= d
    chunk = shape[axis]
    while chunk > 1 and n_index * chunk > T.TRITON_MAX_TENSOR_NUMEL:
        chunk //= 2
    idx_e = sem.expand_dims(index, axis + 1)
    out = None
    for k, piece in enumerate(_pieces(sem, image, axis, shape[axis] // chunk)):
        # (.., out position at `axis`, source position at `axis` + 1, ..)
        src_e = sem.expand_dims(piece, axis)
        hit = sem.equal(idx_e, _range_along(sem, chunk, axis + 1, rank + 1, k * chunk))
        picked = sem.where(hit, src_e, sem.zero_like(src_e))
        part = sem.cast(tl_sum.impl(sem, picked, axis + 1), image_type)
        out = part if out is None else sem.or_(out, part)
    return sem.cast(out, T.int1) if elem == T.int1 else sem.bitcast(out, elem)


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
