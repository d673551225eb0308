"""Runs every test of the numerical suite on each backend of `numerics_backends.BACKENDS`
("interpreter", "cuda", "cuda-emulated"): the autouse fixture `numerics_backend` is
parametrized here and makes its backend the one `numerics_backends.run` launches on.

"cuda" is skipped only where there is no CUDA GPU (the `requires_cuda` mark of
tests/conftest.py). "cuda-emulated" runs once per capability it lowers for
(`nb.EMULATED_CAPABILITIES`). Markers:
- `backends(*names, reason=...)`: run only on these backends — for behaviour that is
  genuinely one backend's (the reason says why);
- `lowering_bug(reason, backends=COMPILED)`: a known bug of the CUDA lowering: a
  strict xfail on those backends (so the fix is noticed);
- `backend_independent`: not parametrized at all (tests of the suite's own helpers).

Also puts this directory and tests/backends/interpreter (the hand-built kernels of
`interp_test_kernels`, shared with the interpreter's speed tests and the CUDA scalar
tests) on sys.path, whatever pytest's import mode.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
for _path in (str(_HERE), str(_HERE.parent / "backends" / "interpreter")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import numerics_backends as nb  # noqa: E402  (importable once the path above is set)


def pytest_configure(config):
    config.addinivalue_line("markers", "backends(*names, reason): run this numerical test only on these backends")
    config.addinivalue_line("markers", "lowering_bug(reason, backends): a known CUDA lowering bug (strict xfail)")
    config.addinivalue_line("markers", "backend_independent: a numerical-suite test not run per backend")


def _requires_cuda(config) -> pytest.MarkDecorator:
    """tests/conftest.py's `requires_cuda`, from the conftest module pytest loaded."""
    root = (_HERE.parent / "conftest.py").resolve()
    for plugin in config.pluginmanager.get_plugins():
        path = getattr(plugin, "__file__", None)
        if path and Path(path).resolve() == root:
            return plugin.requires_cuda
    raise RuntimeError(f"{root} was not loaded as a conftest")


def pytest_generate_tests(metafunc):
    if "numerics_backend" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("backend_independent"):
        return
    only = metafunc.definition.get_closest_marker("backends")
    if only is not None:
        assert only.kwargs.get("reason"), "say why a numerical test is limited to some backends"
    names = only.args if only is not None else nb.BACKENDS
    bug = metafunc.definition.get_closest_marker("lowering_bug")
    params = []
    for name in names:
        marks = [_requires_cuda(metafunc.config)] if name == "cuda" else []
        if bug is not None and name in bug.kwargs.get("backends", nb.COMPILED):
            marks.append(pytest.mark.xfail(strict=True, reason=bug.args[0]))
        if name != "cuda-emulated":
            params.append(pytest.param((name, 90), marks=marks, id=name))
            continue
        for cap in nb.EMULATED_CAPABILITIES:
            params.append(pytest.param((name, cap), marks=marks, id=f"{name}-sm{cap}"))
    metafunc.parametrize("numerics_backend", params, indirect=True)


@pytest.fixture(autouse=True)
def numerics_backend(request):
    param = getattr(request, "param", None)
    if param is None:  # a backend_independent test
        yield None
        return
    name, cap = param
    nb.set_current(name, cap)
    try:
        yield name
    finally:
        nb.set_current("interpreter")
