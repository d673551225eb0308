"""Started Python processes of a `python -m tegula.compat` program resolve `import
triton` to tegula too (PyTorch Inductor's compile workers are such processes).

`tegula.compat.install(subprocesses=True)` puts this directory first on `PYTHONPATH`
and sets `TEGULA_COMPAT=1`; Python imports `sitecustomize` at start-up, finds this
file, installs the finder when the variable is set, and then runs the `sitecustomize`
this one shadows, if the environment has one.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _install() -> None:
    from tegula.config import knobs

    if knobs.compat:
        from tegula import compat

        compat.install(subprocesses=True)


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_install()
_chain()
