"""docs/numerics.md and `numerics_bounds` (the tolerances the suite uses) say the same
thing: every row of the doc's ulp table is a bound of the module, with the same
numbers, and every bound of the module has its row."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numerics_bounds import ULP_BOUNDS, assert_ulps, describe, dot_bound, gamma, round_to, sum_bound, ulp

pytestmark = pytest.mark.backend_independent

DOC = Path(__file__).resolve().parents[2] / "docs" / "numerics.md"


def doc_ulp_rows() -> dict[tuple[str, str], list[str]]:
    """(op, type) -> [GPU, interpreter, emulator, GPU vs interpreter] cells of the
    table whose rows start with a backticked op name."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0].startswith("`") and cells[0].endswith("`"):
            key = (cells[0].strip("`"), cells[1])
            assert key not in rows, f"{key} appears twice in {DOC.name}"
            rows[key] = cells[2:6]
    return rows


def test_doc_table_matches_the_bounds_the_tests_use():
    rows = doc_ulp_rows()
    assert set(rows) == set(ULP_BOUNDS), (sorted(set(rows) ^ set(ULP_BOUNDS)))
    for key, bound in ULP_BOUNDS.items():
        want = [describe(bound.cuda), describe(bound.interpreter), describe(bound.emulated),
                describe(bound.gpu_vs_interpreter)]
        assert rows[key] == want, f"{DOC.name} row {key}: {rows[key]} but numerics_bounds says {want}"


def test_ulp_and_rounding_helpers():
    assert ulp(np.array([1.0, 1.5, 2.0]), "f32").tolist() == [2.0 ** -23, 2.0 ** -23, 2.0 ** -22]
    assert ulp(np.array([0.0, 1e-45]), "f32").tolist() == [2.0 ** -149] * 2
    assert round_to(np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -40]), "bf16").tolist() \
        == [1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7]
    with pytest.raises(AssertionError, match="beyond"):
        assert_ulps(np.array([1 + 2.0 ** -22]), np.array([1.0]), "f32", 1)
    assert_ulps(np.array([1 + 2.0 ** -22]), np.array([1.0]), "f32", 2)
    assert gamma(3, "f32") > 3 * 2.0 ** -24
    assert sum_bound(1, 5.0, "f32") == 0 and dot_bound(4, 2.0, "f64") == 2 * gamma(4, "f64")
