"""`triton._C.libtriton`: `ir` (see the package docstring) and `nvidia` (the cuBLASLt
handle of Triton's tutorials, through torch)."""
from types import SimpleNamespace


class context:
    """An IR context: tegula's IR needs none; it is accepted and carried along."""


def load_dialects(ctx: context) -> None:
    """tegula has no MLIR dialects to load."""


ir = SimpleNamespace(context=context, load_dialects=load_dialects)

from . import nvidia  # noqa: E402

__all__ = ["ir", "nvidia"]
