"""Makes `interp_test_kernels` (hand-built IR kernels, independent of the frontend)
importable whatever pytest's import mode. Besides the interpreter-specific tests here
(rule coverage, speed, the exact fma), the numerical suite in tests/numerics and the
CUDA scalar-op tests use these kernels."""
from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
