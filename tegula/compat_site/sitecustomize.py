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
    # The one place outside tegula.config that reads the variable (knob `compat`):
    # importing tegula.config imports all of tegula, which every Python process
    # started with this directory on its path would pay for, wanted or not.
    if os.environ.get("TEGULA_COMPAT", "").strip().lower() not in ("1", "true", "yes", "on"):
        return
    try:
        from tegula import compat
    except Exception as e:  # a child Python without tegula's dependencies: run without
        print(f"tegula.compat: not resolving `import triton` to tegula here ({e})", file=sys.stderr)
        return
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
