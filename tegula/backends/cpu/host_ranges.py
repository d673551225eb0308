"""The host arrays a CPU launch's loaded pointers may reach (pointer tables).

A kernel that turns loaded addresses into pointers checks each access through them
against a table of byte ranges the launch appends to `sizes` (`lower_memory.
_outside_host_arrays`). The compiler names the arguments holding those addresses
(`passes.pointer_table_arguments`, kept in the metadata as `cpu_pointer_tables`); the
launch reads their values, drops those inside argument buffers, and asks
`host_arrays.host_arrays_holding` for the arrays holding the rest: the ranges are
those arrays only. Where the compiler could not name the arguments, or the tables
hold too many distinct addresses to look up one by one, every live host array is
listed (a walk over the collector's objects, as before this lookup existed).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..host_arrays import HostArray, all_host_arrays, host_arrays_holding

# more table entries, or distinct outside addresses, than these: list every live array
# instead (reading a huge table on every launch would cost more than the walk)
_MOST_ENTRIES = 1 << 16
_MOST_ADDRESSES = 4096
# the null page: never a buffer, and a table's padding entries are often 0
_FIRST_ADDRESS = 4096


def _table_values(arg: Any, is_pointer: bool) -> Optional[np.ndarray]:
    """The 64-bit values of one table argument (None: cannot read them as addresses)."""
    if not is_pointer:
        return np.array([int(arg) & ((1 << 64) - 1)], np.uint64)
    if not isinstance(arg, np.ndarray) or arg.itemsize != 8:
        return None
    return np.ascontiguousarray(arg).reshape(-1).view(np.uint64)


def table_addresses(tables: Sequence[int], pointer_args: Sequence[bool], args: Sequence[Any],
                    ranges: Sequence[tuple[int, int]]) -> Optional[set[int]]:
    """The distinct addresses in the table arguments `tables` (positions in `args`)
    that no argument buffer (`ranges`: [lo, hi) byte addresses) holds; None when they
    cannot all be read or are too many to look up."""
    parts = []
    for k in tables:
        values = _table_values(args[k], pointer_args[k])
        if values is None:
            return None
        parts.append(values)
    if not parts:
        return set()
    if sum(len(p) for p in parts) > _MOST_ENTRIES:
        return None
    values = np.unique(np.concatenate(parts))
    keep = values >= _FIRST_ADDRESS
    for lo, hi in ranges:
        if hi > lo:
            keep &= ~((values >= np.uint64(lo)) & (values < np.uint64(hi)))
    values = values[keep]
    if len(values) > _MOST_ADDRESSES:
        return None
    return {int(v) for v in values}


def host_ranges(tables: Optional[Sequence[int]], pointer_args: Sequence[bool], args: Sequence[Any],
                ranges: Sequence[tuple[int, int]]) -> list[HostArray]:
    """The host arrays the launch's loaded pointers may point into (their owners stay
    alive while the caller holds the list)."""
    addresses = None if tables is None else table_addresses(tables, pointer_args, args, ranges)
    if addresses is None:
        return all_host_arrays()
    if not addresses:
        return []
    unique = {e.low: e for e in host_arrays_holding(addresses).values()}
    return list(unique.values())
