"""On-disk autotuning results, so another process reuses a tuning without benchmarking.

A result is one JSON file under `<cache_dir>/autotune/`, named by the SHA-256 of
everything that decides the choice: the kernel's hash (`JITFunction.cache_key`: its
source, callees, globals, tegula version), the device, the tuning key, and the list of
candidate configs. The file also repeats the config list, which is checked on load, so
a hash collision or a hand-edited file can only cause a re-tune, never a wrong config.
Writes are atomic (a temporary file in the same directory, then `os.replace`), so
concurrent processes see either no file or a whole one.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tegula.config import knobs

FORMAT = "tegula-autotune-1"


@dataclass
class CachedTuning:
    """A stored result: the index of the chosen config and every config's timings."""

    best_index: int
    timings: list[Any]  # per config: a list of floats (inf for a failed config)
    failures: dict[int, str]


def cache_file(key_parts: Sequence[str]) -> str:
    digest = hashlib.sha256("\0".join((FORMAT, *key_parts)).encode("utf-8")).hexdigest()
    return os.path.join(knobs.cache_dir, "autotune", f"{digest}.json")


def _json_timing(t: Any) -> Any:
    # JSON has no infinity; failed configs are stored as null and read back as inf.
    if isinstance(t, (list, tuple)):
        return [_json_timing(x) for x in t]
    t = float(t)
    return t if t != float("inf") else None


def _py_timing(t: Any) -> Any:
    if isinstance(t, list):
        return [_py_timing(x) for x in t]
    return float("inf") if t is None else float(t)


def load(path: str, config_strs: Sequence[str]) -> Optional[CachedTuning]:
    """The stored result at `path` if it exists and was made for exactly these configs."""
    try:
        with open(path) as f:
            record = json.load(f)
        if record.get("format") != FORMAT or record.get("configs") != list(config_strs):
            return None
        best = int(record["best"])
        timings = [_py_timing(t) for t in record["timings"]]
        if not 0 <= best < len(config_strs) or len(timings) != len(config_strs):
            return None
        failures = {int(k): str(v) for k, v in record.get("failures", {}).items()}
        return CachedTuning(best, timings, failures)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, partial or foreign file: tune again


def store(path: str, *, kernel: str, key: str, config_strs: Sequence[str], best_index: int,
          timings: Sequence[Any], failures: dict[int, str]) -> None:
    """Write a result atomically; a failure to write only costs the next process a tuning."""
    record = {
        "format": FORMAT,
        "kernel": kernel,
        "key": key,
        "configs": list(config_strs),
        "best": best_index,
        "timings": [_json_timing(t) for t in timings],
        "failures": {str(i): r for i, r in failures.items()},
    }
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(record, f, indent=1)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
