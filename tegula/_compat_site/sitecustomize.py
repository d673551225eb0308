"""Installs `tegula.compat` in Python processes started by one that runs under it.

`python -m tegula.compat ...` puts this directory first on PYTHONPATH, so every child
Python process (pytest-xdist workers, multiprocessing, subprocess.run([sys.executable,
...])) imports this file at start-up and sees `import triton` as tegula too. Python
imports only one `sitecustomize`; the one this directory shadows, if any, is run after.
"""
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))

try:
    from tegula.compat import install
except ImportError:  # tegula gone from the path of this child: nothing to alias
    pass
else:
    install()

_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
