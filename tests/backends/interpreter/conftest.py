"""Makes `interp_test_kernels` (the hand-built kernels of these tests) importable
whatever pytest's import mode (prepend or importlib)."""
from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
