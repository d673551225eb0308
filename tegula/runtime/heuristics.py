"""`tegula.heuristics`: meta-parameters computed from the launch arguments.

`@heuristics({"BLOCK": lambda args: ...})` sets each named meta-parameter, before every
launch, to its function of a dict holding all the arguments by name (positional and
keyword, plus whatever an enclosing autotuner added). Stacked under `@autotune`
(`autotune(heuristics(jit))`) the functions also see the config's values; stacked above
it (`heuristics(autotune(jit))`) they see only the caller's arguments and their results
reach the autotuner as launch keywords, which a config must not also set. Both orders
behave as in Triton.
"""
from __future__ import annotations

from typing import Any, Callable

from .kernel_interface import KernelInterface, register_kernel


class Heuristics(KernelInterface):
    """The object `@heuristics` makes; `fn` is the wrapped kernel."""

    def __init__(self, fn: Any, arg_names: list[str],
                 values: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
        register_kernel(self)
        self.fn = fn
        self.values = values
        self.arg_names = arg_names

    @property
    def __name__(self) -> str:  # type: ignore[override]
        return self.fn.__name__

    def _apply(self, args: tuple, kwargs: dict[str, Any]) -> None:
        for name, heur in self.values.items():
            named = {**dict(zip(self.arg_names, args)), **kwargs}
            try:
                kwargs[name] = heur(named)
            except KeyError as e:
                # The usual mistake: the heuristic reads an argument the launch did not pass
                # (or misspells it). Say which heuristic and what it could have read.
                raise KeyError(f"heuristic for '{name}' of kernel '{self.__name__}' looked up {e}, "
                               f"which is not among the launch's arguments: {sorted(named)}") from None

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self._apply(args, kwargs)
        return self.fn.run(*args, **kwargs)

    def warmup(self, *args: Any, **kwargs: Any) -> Any:
        self._apply(args, kwargs)
        return self.fn.warmup(*args, **kwargs)


def heuristics(values: dict[str, Callable[[dict[str, Any]], Any]]) -> Callable[[Any], Heuristics]:
    """Decorator: compute the meta-parameters named in `values` from the arguments."""

    def decorator(fn: Any) -> Heuristics:
        return Heuristics(fn, fn.arg_names, values)

    return decorator
