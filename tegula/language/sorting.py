"""`tl.sort`, `tl.topk`, `tl.bitonic_merge` and `tl.flip` (Triton 3.6 names, arguments
and limits: power-of-two sizes; sort, topk and bitonic_merge along the last dimension),
built from existing tile operations, so every backend runs them.

The dimension of n = 2^k elements is viewed as k axes of size 2, one per bit of the
element index (the most significant first), so "the element whose index differs in
bit j" is the other half of one size-2 axis. `_halves` moves that axis last and splits
it; `_unhalves` joins and moves it back. A bitonic sort is then k(k+1)/2
compare-exchange steps over such halves; flip swaps the halves of every bit axis.
Comparisons follow `<`: a NaN never moves (no comparison with it is true), as in
Triton's compare-and-swap.
"""
from __future__ import annotations

from typing import Any, Union

from .constexpr import unwrap_constexpr as U
from .core import builtin
from .tensor import tensor


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


class _BitView:
    """A tensor of shape `outer + (n,)` seen as `outer + (2,) * k` (bit axes)."""

    def __init__(self, sem, x: tensor):
        self.sem = sem
        shape = sem.shape_of(x)
        if not shape:
            raise ValueError("sort/flip take a tensor, not a scalar")
        self.outer, self.n = tuple(shape[:-1]), shape[-1]
        self.k = _log2(self.n, "the size of the sorted dimension")
        self.h = sem.reshape(x, self.outer + (2,) * self.k) if self.k else x

    def axis(self, bit: int) -> int:
        """The axis of the bit view that holds index bit `bit`."""
        return len(self.outer) + self.k - 1 - bit

    def _last(self, bit: int) -> list[int]:
        """The permutation moving the axis of `bit` last."""
        a = self.axis(bit)
        return [d for d in range(len(self.outer) + self.k) if d != a] + [a]

    def halves(self, h: tensor, bit: int) -> tuple[tensor, tensor]:
        """(elements with index bit `bit` = 0, those with it = 1), each without that axis."""
        return self.sem.split(self.sem.permute(h, self._last(bit)))

    def unhalves(self, lo: tensor, hi: tensor, bit: int) -> tensor:
        order = self._last(bit)
        return self.sem.permute(self.sem.join(lo, hi), [order.index(d) for d in range(len(order))])

    def bit_mask(self, bit: int, without: int) -> tensor:
        """A bool tensor of the halves' shape (bit axis `without` removed): index bit `bit`."""
        rank = len(self.outer) + self.k
        a, b = self.axis(without), self.axis(bit)
        remaining = [d for d in range(rank) if d != a]
        pos = remaining.index(b)
        shape = [1] * len(remaining)
        shape[pos] = 2
        half_shape = [(2 if d >= len(self.outer) else self.outer[d]) for d in remaining]
        ind = self.sem.reshape(self.sem.arange(0, 2), shape)
        return self.sem.broadcast_to_shape(self.sem.not_equal(ind, 0), tuple(half_shape))

    def result(self, h: tensor) -> tensor:
        return self.sem.reshape(h, self.outer + (self.n,)) if self.k else h


def _compare_exchange(sem, view: _BitView, h: tensor, bit: int, descending: Union[bool, tensor]) -> tensor:
    """Order each pair differing in index bit `bit`: ascending, or descending where
    `descending` (a constant, or a bool tensor of the halves' shape) holds."""
    lo, hi = view.halves(h, bit)
    swap = sem.greater_than(lo, hi)
    if isinstance(descending, tensor):
        swap = sem.xor_(swap, descending)
    elif descending:
        swap = sem.less_than(lo, hi)
    return view.unhalves(sem.where(swap, hi, lo), sem.where(swap, lo, hi), bit)


def _merge(sem, view: _BitView, h: tensor, stage: int, descending: bool) -> tensor:
    """The bitonic merge of stage `stage` (pairs at distances 2^(stage-1) .. 1): runs of
    2^stage elements come out sorted, alternating in direction by index bit `stage`
    (all in `descending`'s direction at the last stage)."""
    for bit in range(stage - 1, -1, -1):
        if stage == view.k:
            direction: Union[bool, tensor] = descending
        else:
            direction = view.bit_mask(stage, bit)
            if descending:
                direction = sem.invert(direction)
        h = _compare_exchange(sem, view, h, bit, direction)
    return h


def _last_dim(sem, x: tensor, dim: Any, fn: str) -> tensor:
    x = sem.to_tensor(U(x))
    rank = len(sem.shape_of(x))
    d = U(dim)
    if d is not None and int(d) not in (rank - 1, -1):
        raise ValueError(f"tl.{fn} only supports the last dimension (dim={rank - 1} or None), got dim={d}")
    return x


@builtin
def sort(sem, x, dim=None, descending=0):
    """`x` sorted along its last dimension (a power of two in size)."""
    x = _last_dim(sem, x, dim, "sort")
    view = _BitView(sem, x)
    h = view.h
    for stage in range(1, view.k + 1):
        h = _merge(sem, view, h, stage, bool(U(descending)))
    return view.result(h)


@builtin
def topk(sem, x, k, dim=None):
    """The `k` largest elements of the last dimension, in descending order."""
    x = _last_dim(sem, x, dim, "topk")
    k = int(U(k))
    n = sem.shape_of(x)[-1]
    _log2(k, "k")
    if k > n:
        raise ValueError(f"tl.topk: k={k} is larger than the dimension ({n})")
    view = _BitView(sem, x)
    h = view.h
    for stage in range(1, view.k + 1):
        h = _merge(sem, view, h, stage, True)
    # keep the first k: view the sorted dimension as (2,) * log2(n/k) + (k,) and take the
    # first half of each leading size-2 axis
    outer = view.outer
    drop = view.k - _log2(k, "k")
    t = sem.reshape(view.result(h), outer + (2,) * drop + (k,))
    for _ in range(drop):
        rank = len(sem.shape_of(t))
        a = len(outer)
        order = [d for d in range(rank) if d != a] + [a]
        t, _ = sem.split(sem.permute(t, order))
    return t


@builtin
def bitonic_merge(sem, x, dim=None, descending=0):
    """Sort a bitonic last dimension (ascending then descending, or the reverse)."""
    x = _last_dim(sem, x, dim, "bitonic_merge")
    view = _BitView(sem, x)
    return view.result(_merge(sem, view, view.h, view.k, bool(U(descending))))


@builtin
def flip(sem, x, dim=None):
    """`x` reversed along `dim` (the last dimension when None; a power of two in size)."""
    x = sem.to_tensor(U(x))
    shape = sem.shape_of(x)
    rank = len(shape)
    d = rank - 1 if U(dim) is None else int(U(dim))
    if not -rank <= d < rank:
        raise ValueError(f"tl.flip: dim {d} is out of range for a tensor of rank {rank}")
    d %= rank
    order = [i for i in range(rank) if i != d] + [d]
    moved = sem.permute(x, order) if d != rank - 1 else x
    view = _BitView(sem, moved)
    h = view.h
    for bit in range(view.k):
        lo, hi = view.halves(h, bit)
        h = view.unhalves(hi, lo, bit)
    out = view.result(h)
    return sem.permute(out, [order.index(i) for i in range(rank)]) if d != rank - 1 else out


__all__ = ["bitonic_merge", "flip", "sort", "topk"]
