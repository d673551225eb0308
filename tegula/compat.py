"""Run code written for `import triton` on tegula, unchanged.

    python -m tegula.compat script.py [args...]      # run a script
    python -m tegula.compat -m package.module [args] # run a module, as `python -m`

or, from Python, `tegula.compat.install()` before the first `import triton`.

`install()` puts a finder first on `sys.meta_path` that resolves every `triton.X` to the
tegula module `tegula.X` (the very same module object, so `triton.language is
tegula.language`), with a few renames where tegula's layout differs
(`triton.language.extra.cuda.libdevice` → tegula's libdevice), and `triton` itself to a
`TritonModule` facade over `tegula` whose only difference is `__version__` (the Triton
release tegula follows). A Triton module tegula does not have fails to import with a
message naming both.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import linecache
import os
import re
import runpy
import sys
import weakref
from types import ModuleType
from typing import Iterator, Optional, Sequence

# triton name -> tegula candidates, tried in order (the first that imports wins).
_RENAMES: dict[str, tuple[str, ...]] = {
    "triton.language.extra.cuda.libdevice": ("tegula.language.extra.libdevice",),
    "triton.language.libdevice": ("tegula.language.extra.libdevice",),
    "triton.compiler.compiler": ("tegula.compiler.compiler",),
    "triton.runtime.jit": ("tegula.runtime.jit",),
    "triton.runtime.cache": ("tegula.runtime.cache_manager",),
}


# triton package -> the tegula package standing for it and everything under it
_PACKAGE_RENAMES: dict[str, str] = {
    "triton.backends": "tegula.compat_surface.backends",
    "triton._C": "tegula.compat_surface._C",
}


def _candidates(fullname: str) -> tuple[str, ...]:
    if fullname in _RENAMES:
        return _RENAMES[fullname]
    for package, real in _PACKAGE_RENAMES.items():
        if fullname == package or fullname.startswith(package + "."):
            return (real + fullname[len(package):],)
    return ("tegula" + fullname[len("triton"):],)


class TritonAliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves `triton[.X]` to the already-importable tegula module."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != "triton" and not fullname.startswith("triton."):
            return None
        module = None
        tried = _candidates(fullname)
        for real in tried:
            try:
                module = importlib.import_module(real)
                break
            except ModuleNotFoundError as e:
                # Only "this tegula module does not exist" moves on; a broken import inside
                # an existing tegula module is a real error.
                if e.name is None or not (real == e.name or real.startswith(e.name + ".")):
                    raise
        if module is None:
            raise ModuleNotFoundError(
                f"No module named '{fullname}': tegula runs Triton code but has no counterpart "
                f"for it (looked for {', '.join(tried)})", name=fullname)
        return importlib.machinery.ModuleSpec(fullname, self, loader_state=module,
                                              is_package=hasattr(module, "__path__"))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = spec.loader_state
        spec.loader_state = (module, getattr(module, "__spec__", None))
        if spec.name == "triton":
            return TritonModule(module)
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system set `module.__spec__` to the alias spec; give the tegula
        # module its own back (reloads and pickling look at it). The `triton` facade
        # keeps its alias spec: it is a module of its own.
        spec = module.__spec__
        if spec is not None and isinstance(spec.loader_state, tuple) and not isinstance(module, TritonModule):
            module.__spec__ = spec.loader_state[1]


class TritonModule(ModuleType):
    """What `import triton` gives under compat: tegula's top level seen through Triton's
    eyes. Every attribute is tegula's (`triton.jit is tegula.jit`; assignments reach
    tegula too), except `__version__`, which is the Triton release tegula is compatible
    with (`tegula.__triton_version__`): libraries branch on it (`>= "3.0.0"`), and
    tegula's own version (`tegula.__version__`) would send them down Triton-2 paths.

    An attribute read once is kept in the facade's own namespace, so later reads are
    plain attribute hits: PyTorch Inductor reads `triton.set_allocator` on every kernel
    launch, and a module `__getattr__` costs about a microsecond a read. tegula's module
    is then a `_WatchedModule`, whose assignments and deletions update those copies."""

    def __init__(self, tegula: ModuleType) -> None:
        super().__init__("triton", tegula.__doc__)
        object.__setattr__(self, "_tegula", tegula)
        object.__setattr__(self, "__version__", tegula.__triton_version__)
        object.__setattr__(self, "__path__", list(tegula.__path__))
        object.__setattr__(self, "__file__", tegula.__file__)
        if type(tegula) is ModuleType:
            tegula.__class__ = _WatchedModule
        _FACADES.add(self)

    def __getattr__(self, name: str):
        package = _PACKAGE_RENAMES.get("triton." + name)
        if package is not None:  # `triton.backends` before `import triton.backends`
            module = importlib.import_module(package)
            object.__setattr__(self, name, module)
            return module
        tegula = object.__getattribute__(self, "_tegula")
        value = getattr(tegula, name)
        if isinstance(tegula, _WatchedModule) and name in tegula.__dict__:
            object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("__") and name.endswith("__"):
            object.__setattr__(self, name, value)
        elif "triton." + name in _PACKAGE_RENAMES and isinstance(value, ModuleType):
            # the import system binding a renamed package (`import triton.backends`):
            # it is Triton's name, not tegula's `tegula.backends`
            object.__setattr__(self, name, value)
        else:
            setattr(object.__getattribute__(self, "_tegula"), name, value)

    def __delattr__(self, name: str) -> None:
        if name.startswith("__") and name.endswith("__"):
            object.__delattr__(self, name)
        else:  # tegula's attribute; its watcher drops this facade's copy
            delattr(object.__getattribute__(self, "_tegula"), name)
            self.__dict__.pop(name, None)

    def __dir__(self):
        return sorted(set(dir(object.__getattribute__(self, "_tegula"))) | {"__version__"})


# the live `triton` facades, whose copies of tegula's attributes `_WatchedModule` updates
_FACADES: "weakref.WeakSet[TritonModule]" = weakref.WeakSet()
# the names a facade holds as its own, never copies of tegula's
_FACADE_OWN = frozenset({"__version__", "__path__", "__file__", "__spec__", "__loader__", "__name__", "__doc__",
                         "__package__", "_tegula"})


class _WatchedModule(ModuleType):
    """The class of tegula's top-level module once a `triton` facade exists: setting or
    deleting one of its attributes also updates the copy a facade keeps of it."""

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        for facade in _copies_of(name):
            object.__setattr__(facade, name, value)

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        for facade in _copies_of(name):
            object.__delattr__(facade, name)


def _copies_of(name: str) -> list[TritonModule]:
    """The facades holding a copy of tegula's attribute `name`."""
    if name in _FACADE_OWN or "triton." + name in _PACKAGE_RENAMES:
        return []
    return [f for f in list(_FACADES) if name in f.__dict__]


_FINDER = TritonAliasFinder()


def _is_ours(module: ModuleType) -> bool:
    return isinstance(module, TritonModule) or getattr(module, "__name__", "").startswith("tegula")


def install(subprocesses: bool = False) -> None:
    """Make `import triton...` resolve to tegula in this process (idempotent). Triton
    modules imported before this call are forgotten, so later imports get tegula.

    `subprocesses=True` (what `python -m tegula.compat` does) extends that to the Python
    processes this one starts, such as PyTorch Inductor's compile workers: it sets
    `TEGULA_COMPAT=1` and puts `tegula/compat_site` (whose `sitecustomize` installs the
    finder) first on `PYTHONPATH`."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        if not _is_ours(sys.modules[name]):
            del sys.modules[name]
    if subprocesses:
        _export_to_subprocesses()


_SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat_site")


def _export_to_subprocesses() -> None:
    os.environ["TEGULA_COMPAT"] = "1"
    # the directory of the `tegula` package too, so children import this tegula
    roots = [_SITE_DIR, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in roots]
    os.environ["PYTHONPATH"] = os.pathsep.join(roots + current)
    if _SITE_DIR not in sys.path:
        # Inductor builds its workers' PYTHONPATH from sys.path
        sys.path.insert(1 if sys.path else 0, _SITE_DIR)


def uninstall() -> None:
    """Undo `install()`: `import triton` finds the real Triton (if any) again."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        if _is_ours(sys.modules[name]):
            del sys.modules[name]
    if os.environ.pop("TEGULA_COMPAT", None) is not None:
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _SITE_DIR]
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
        if _SITE_DIR in sys.path:
            sys.path.remove(_SITE_DIR)


_USAGE = ("usage: python -m tegula.compat script.py [args...]  |  python -m tegula.compat -m module [args...]"
          "  |  python -m tegula.compat -c command [args...]")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stderr if not argv else sys.stdout)
        return 0 if argv else 2
    install(subprocesses=True)
    if argv[0] == "-m":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = [argv[1], *argv[2:]]
        sys.path.insert(0, os.getcwd())
        with _gpu_only_note(None):
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    if argv[0] == "-c":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        # as `python -c`: argv[0] is "-c", the current directory first on the path
        sys.argv = ["-c", *argv[2:]]
        sys.path.insert(0, "")
        with _gpu_only_note(None):
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        return 0
    script = argv[0]
    if not os.path.exists(script):
        print(f"tegula.compat: can't open file {script!r}", file=sys.stderr)
        return 2
    sys.argv = [script, *argv[1:]]
    # As `python script.py` does: the script's directory comes first on the path.
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    with _gpu_only_note(os.path.abspath(script)):
        runpy.run_path(script, run_name="__main__")
    return 0


# `x.is_cuda`, `.cuda()`, `device="cuda"` / `"cuda:0"`, `torch.cuda.…`, and a compiled
# kernel's register counts (None off the GPU: occupancy arithmetic on them is GPU-only)
_ASKS_FOR_CUDA = re.compile(r"""is_cuda|\.cuda\(|["']cuda(:\d+)?["']|torch\.cuda|\bn_regs\b|\bn_spills\b""")


@contextlib.contextmanager
def _gpu_only_note(script: Optional[str]) -> Iterator[None]:
    """When the script stops at a line of its own that asks for CUDA (`device="cuda"`,
    `assert x.is_cuda`) on a machine without a GPU in use, say so under the traceback:
    that part of the script is GPU-only, it is not a tegula failure."""
    try:
        yield
    except Exception as e:
        tb, where = e.__traceback__, None
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if (name == script) if script else not (name.startswith("<") or _is_library(name)):
                where = (name, tb.tb_lineno)
            tb = tb.tb_next
        line = linecache.getline(*where).strip() if where else ""
        if _ASKS_FOR_CUDA.search(line) and not _gpu_in_use():
            # at exit, so that it comes after the traceback Python prints
            atexit.register(print, f"tegula.compat: note: {where[0]}:{where[1]} needs a CUDA GPU (`{line}`) "
                            "and none is in use here; the script ran on the CPU up to that line", file=sys.stderr)
        raise


def _is_library(filename: str) -> bool:
    here = os.path.dirname(os.path.abspath(__file__))
    return filename.startswith(here) or "site-packages" in filename or filename.startswith(sys.prefix)


def _gpu_in_use() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:
        return False


if __name__ == "__main__":
    # `python -m` runs this file as `__main__`, a second copy of the module: use the
    # real `tegula.compat` so that scripts calling install()/uninstall() share its finder.
    from tegula.compat import main as _main

    sys.exit(_main())
