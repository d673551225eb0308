"""The on-disk compilation cache: content-addressed, atomic, safe across processes.

`compile_key(...)` is a sha256 over everything a compiled kernel depends on: the kernel
source and the sources of its transitive @jit callees and the constexpr globals they
read (the JITFunction's `cache_key`), the signature, the specialization bits, the
constexpr values, the compile options, the target, the tegula and LLVM versions, and a
hash of tegula's own source (so a changed compiler never reuses old binaries).

`FileCache` stores one *group* of files per key under `<cache_dir>/<key[:2]>/<key>/`:
the artifacts (`<name>.<stage>`) and a manifest `__grp__<name>.json` listing them.
Every file is written to a temporary file in the same directory and moved into place
with `os.replace` (atomic on POSIX and Windows); the manifest is written last, so a
reader that finds a manifest finds complete files. Two processes compiling the same
kernel write identical bytes, so whichever replace lands last is equally right.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from typing import Any, Mapping, Optional, Union

from ..config import knobs

Content = Union[str, bytes]

CACHE_FORMAT = "tegula-cache-1"


@functools.lru_cache(maxsize=1)
def compiler_source_hash() -> str:
    """A sha256 over the text of every module of the tegula package: a change to the
    compiler itself (an editable install, a development checkout) must not reuse
    binaries the old code produced under the same version string. Computed once per
    process (a few milliseconds)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for directory, subdirs, files in os.walk(root):
        subdirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def versions() -> str:
    """tegula's version and source hash and LLVM's version (through llvmlite), all part
    of every key."""
    from .. import __version__ as tegula_version

    try:
        import llvmlite.binding as llvm

        llvm_version = ".".join(str(x) for x in llvm.llvm_version_info)
    except Exception:  # llvmlite missing or broken: the interpreter does not need it
        llvm_version = "none"
    return f"{CACHE_FORMAT}|tegula {tegula_version} {compiler_source_hash()}|llvm {llvm_version}"


def stable_repr(value: Any) -> tuple[str, bool]:
    """(text, stable) for a constexpr value in a key. `stable` is False when the text is
    only meaningful inside this process (it embeds an object address), so the result
    must not be stored on disk."""
    if getattr(value, "_tegula_jit", False):
        return f"jit:{value.cache_key}", True
    if isinstance(value, (list, tuple)):
        parts = [stable_repr(v) for v in value]
        return (f"{type(value).__name__}({','.join(p for p, _ in parts)})",
                all(s for _, s in parts))
    text = f"{type(value).__name__}:{value!r}"
    return text, " at 0x" not in text


def compile_key(fn_key: str, signature: Mapping[str, str], constexprs: Mapping[str, Any],
                attrs: Mapping[str, Any], options: Any, target: Any) -> tuple[str, bool]:
    """(hex key, storable). `storable` is False when a constexpr value has no
    process-independent text (see `stable_repr`)."""
    storable = True
    h = hashlib.sha256()
    h.update(versions().encode())
    h.update(f"|fn:{fn_key}".encode())
    h.update(("|sig:" + ",".join(f"{k}:{v}" for k, v in signature.items())).encode())
    for k, v in constexprs.items():
        text, stable = stable_repr(v)
        storable = storable and stable
        h.update(f"|cx:{k}={text}".encode("utf-8", errors="backslashreplace"))
    # an exact divisor (the JIT measured it) is marked `=`: a promised one may be versioned
    h.update(("|attrs:" + ",".join(f"{k}:{getattr(v, 'divisibility', v)}"
                                    f"{'=' if getattr(v, 'exact_divisibility', False) else ''}"
                                    for k, v in attrs.items())).encode())
    h.update(f"|opts:{options!r}|target:{target!r}".encode())
    # knobs that change the generated code
    h.update(f"|tc:{knobs.dot_tensor_cores}|wgmma:{knobs.wgmma}|regb:{knobs.wgmma_register_b}|mmareg:{knobs.mma_register_operands}|tma:{knobs.tma}"
             f"|occ:{knobs.occupancy_registers}|ws:{knobs.warp_specialize}|wsreg:{knobs.warp_specialize_registers}"
             f"|tmarel:{knobs.tma_release_by_arrival}|waituse:{knobs.wgmma_wait_at_use}"
             f"|pingpong:{knobs.warpgroup_pingpong}|storebuf:{knobs.loop_store_buffers}|cpl1:{knobs.cp_async_l1}"
             f"|lagged:{knobs.pipeline_lagged}|regoff:{knobs.register_offsets}|alignver:{knobs.alignment_versions}"
             f"|f32:{knobs.f32_default}"
             .encode())
    return h.hexdigest(), storable


def _atomic_write(path: str, data: Content) -> None:
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix="-" + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class FileCache:
    """The files of one key. `get_group(name)` / `put_group(name, files)`."""

    def __init__(self, key: str, cache_dir: Optional[str] = None):
        self.key = key
        root = cache_dir if cache_dir else knobs.cache_dir
        self.dir = os.path.join(root, key[:2], key)

    def _manifest(self, name: str) -> str:
        return os.path.join(self.dir, f"__grp__{name}.json")

    def get_group(self, name: str) -> Optional[dict[str, Content]]:
        """{file name: content} of a complete group, or None (a miss). Text files come
        back as str, the rest as bytes, as the manifest records."""
        try:
            with open(self._manifest(name), "r", encoding="utf-8") as f:
                manifest = json.load(f)
            out: dict[str, Content] = {}
            for fname, kind in manifest["files"].items():
                with open(os.path.join(self.dir, fname), "rb") as f:
                    data = f.read()
                out[fname] = data.decode("utf-8") if kind == "text" else data
            return out
        except (OSError, ValueError, KeyError, UnicodeDecodeError):
            return None

    def put_group(self, name: str, files: Mapping[str, Content]) -> None:
        """Store `files` (names must not contain path separators) and then the manifest.
        Errors (read-only or full disk) are swallowed: the cache is an optimization."""
        try:
            os.makedirs(self.dir, exist_ok=True)
            kinds = {}
            for fname, content in files.items():
                if os.sep in fname or fname.startswith("__grp__"):
                    raise ValueError(f"bad cache file name {fname!r}")
                _atomic_write(os.path.join(self.dir, fname), content)
                kinds[fname] = "text" if isinstance(content, str) else "binary"
            _atomic_write(self._manifest(name), json.dumps({"key": self.key, "files": kinds}))
        except OSError:
            pass
