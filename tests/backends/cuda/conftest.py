"""Makes `cuda_kernels` (the hand-built kernels of the CUDA backend tests) importable
whatever pytest's import mode (prepend or importlib)."""
from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
