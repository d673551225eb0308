"""Triton's cache-manager API (`triton.runtime.cache`): `triton_key()`, `CacheManager`,
`FileCacheManager`, `get_cache_manager(key)`, as Triton 3.6 has them. PyTorch's
Inductor and other tools store their own artifacts through it and key their caches on
`triton_key()`.

`FileCacheManager(key)` keeps the files of one key under `<cache dir>/<key>/` (the
`TEGULA_CACHE_DIR` / `TRITON_CACHE_DIR` knob), writes each atomically (a temporary file
moved into place), and records groups as `__grp__<name>` JSON files listing the paths
of their members, exactly as Triton lays them out. tegula's own compiled kernels use
`cache.FileCache`, which shares the directory but not the layout.
"""
from __future__ import annotations

import base64
import json
import os
import tempfile
import uuid
from abc import ABC, abstractmethod
from typing import Dict, Optional, Union

from ..config import knobs
from .cache import compiler_source_hash


def triton_key() -> str:
    """A string that changes whenever the compiler might generate different code: the
    Triton API version tegula follows, tegula's version and a hash of its source."""
    from .. import __triton_version__, __version__

    return f"{__triton_version__}-tegula-{__version__}-{compiler_source_hash()}"


def _base32(key: str) -> str:
    """Triton's folder name for a hex digest (its caches keep a kernel's files under
    it; PyTorch's `triton_hash_to_path_key` imports this to find a kernel's cubin)."""
    return base64.b32encode(bytes.fromhex(key)).decode("utf-8").rstrip("=")


class CacheManager(ABC):
    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        pass

    @abstractmethod
    def get_file(self, filename: str) -> Optional[str]: ...

    @abstractmethod
    def put(self, data: Union[str, bytes], filename: str, binary: bool = True) -> str: ...

    @abstractmethod
    def get_group(self, filename: str) -> Optional[Dict[str, str]]: ...

    @abstractmethod
    def put_group(self, filename: str, group: Dict[str, str]) -> str: ...


class FileCacheManager(CacheManager):
    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        self.key = key
        if dump:
            root = knobs.dump_dir or os.path.join(knobs.cache_dir, "dump")
        elif override:
            root = knobs.override_dir or os.path.join(knobs.cache_dir, "override")
        else:
            root = knobs.cache_dir
        self.cache_dir = os.path.join(root, key)
        if not override:
            os.makedirs(self.cache_dir, exist_ok=True)

    def _make_path(self, filename: str) -> str:
        return os.path.join(self.cache_dir, filename)

    def has_file(self, filename: str) -> bool:
        return os.path.exists(self._make_path(filename))

    def get_file(self, filename: str) -> Optional[str]:
        return self._make_path(filename) if self.has_file(filename) else None

    def get_group(self, filename: str) -> Optional[Dict[str, str]]:
        path = self.get_file(f"__grp__{filename}")
        if path is None:
            return None
        with open(path, encoding="utf-8") as f:
            children = json.load(f).get("child_paths")
        if children is None:
            return None
        return {name: p for name, p in children.items() if os.path.exists(p)}

    def put_group(self, filename: str, group: Dict[str, str]) -> str:
        return self.put(json.dumps({"child_paths": group}), f"__grp__{filename}", binary=False)

    def put(self, data: Union[str, bytes], filename: str, binary: bool = True) -> str:
        binary = isinstance(data, bytes)
        if not binary:
            data = str(data)
        os.makedirs(self.cache_dir, exist_ok=True)
        path = self._make_path(filename)
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=f".tmp-{uuid.uuid4().hex}-")
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            f.write(data)
        os.replace(tmp, path)
        return path


def get_cache_manager(key: str) -> CacheManager:
    return FileCacheManager(key)


def get_override_manager(key: str) -> CacheManager:
    return FileCacheManager(key, override=True)


def get_dump_manager(key: str) -> CacheManager:
    return FileCacheManager(key, dump=True)


__all__ = ["CacheManager", "FileCacheManager", "get_cache_manager", "get_dump_manager", "get_override_manager",
           "triton_key"]
