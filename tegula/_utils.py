"""`triton._utils`: helpers over nested argument lists (tuples of tuples), as Triton 3.6
has them: `find_paths_if(iterable, pred)` lists the index paths of the leaves
satisfying `pred(path, value)`; `get_iterable_path(iterable, path)` reads one."""
from __future__ import annotations

from typing import Any, Callable, Sequence


def find_paths_if(iterable: Any, pred: Callable[[tuple, Any], bool]) -> list[tuple]:
    """Index paths (tuples) of the leaves `x` of `iterable` with `pred(path, x)`."""
    found: list[tuple] = []

    def visit(x: Any, path: tuple) -> None:
        if isinstance(x, (list, tuple)):
            for i, item in enumerate(x):
                visit(item, path + (i,))
        elif pred(path, x):
            found.append(path)

    if isinstance(iterable, (list, tuple)):
        visit(iterable, ())
    elif pred((), iterable):
        found.append(())
    return found


def get_iterable_path(iterable: Any, path: Sequence[int]) -> Any:
    """`iterable[path[0]][path[1]]...`."""
    for i in path:
        iterable = iterable[i]
    return iterable


def set_iterable_path(iterable: Any, path: Sequence[int], value: Any) -> None:
    """Store `value` at `path` (the innermost container must be mutable)."""
    for i in path[:-1]:
        iterable = iterable[i]
    iterable[path[-1]] = value


__all__ = ["find_paths_if", "get_iterable_path", "set_iterable_path"]
