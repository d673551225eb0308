"""On-disk autotuning results (cache_results=True / TEGULA_CACHE_AUTOTUNING=1), with a
fake JITFunction: reuse across instances and across processes, invalidation, atomicity."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from tegula.runtime import autotuner_cache
from tegula.runtime.autotuner import Config

REPO = Path(__file__).resolve().parents[2]

# The fake kernel lives in a string so that the subprocess test runs exactly the same code.
FAKE_SOURCE = textwrap.dedent('''
    import numpy as np
    from types import SimpleNamespace
    from tegula.runtime.autotuner import Config, autotune

    class FakeJIT:
        _tegula_jit = True

        def __init__(self, cache_key="fake-v1"):
            def scale(named, meta):
                named["x"] *= 2
            self.fn = scale
            self.__name__ = "scale"
            self.arg_names = ["x", "n"]
            self.cache_key = cache_key
            self.runs = []

        def warmup(self, *args, grid, **kwargs):
            return SimpleNamespace(metadata=SimpleNamespace(written_args=("x",)))

        def run(self, *args, grid, warmup=False, **kwargs):
            self.runs.append(kwargs["BLOCK"])
            self.fn(dict(zip(self.arg_names, args)), kwargs)

    TIMES = {16: 3.0, 32: 1.0, 64: 2.0}

    def make(cache_results=True, configs=None, cache_key="fake-v1"):
        jit = FakeJIT(cache_key)
        def do_bench(fn, quantiles):
            fn()
            do_bench.calls += 1
            t = TIMES[jit.runs[-1]]
            return [t, t, t]
        do_bench.calls = 0
        configs = configs or [Config({"BLOCK": b}) for b in (16, 32, 64)]
        kernel = autotune(configs, key=["n"], do_bench=do_bench, cache_results=cache_results)(jit)
        return kernel, jit, do_bench
''')

namespace: dict = {}
exec(compile(FAKE_SOURCE, "<fake>", "exec"), namespace)
make = namespace["make"]


def cache_files() -> list[Path]:
    root = Path(os.environ["TEGULA_CACHE_DIR"]) / "autotune"
    return sorted(root.glob("*.json")) if root.exists() else []


def test_results_are_reused_by_a_new_tuner_without_benchmarking():
    kernel, jit, bench = make()
    x = np.ones(8)
    kernel[(1,)](x, 8)
    assert bench.calls == 3 and kernel.best_config == Config({"BLOCK": 32})
    np.testing.assert_array_equal(x, np.full(8, 2.0))
    files = cache_files()
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    assert record["kernel"] == "scale" and record["best"] == 1

    kernel2, jit2, bench2 = make()
    x = np.ones(8)
    kernel2[(1,)](x, 8)
    assert bench2.calls == 0 and jit2.runs == [32]
    assert kernel2.best_config == Config({"BLOCK": 32})
    assert kernel2.configs_timings[Config({"BLOCK": 16})] == [3.0, 3.0, 3.0]


def test_without_cache_results_nothing_is_written():
    kernel, jit, bench = make(cache_results=False)
    kernel[(1,)](np.ones(8), 8)
    assert cache_files() == []


def test_environment_variable_turns_the_disk_cache_on(monkeypatch):
    monkeypatch.setenv("TEGULA_CACHE_AUTOTUNING", "1")
    kernel, jit, bench = make(cache_results=False)
    kernel[(1,)](np.ones(8), 8)
    assert len(cache_files()) == 1
    kernel2, jit2, bench2 = make(cache_results=False)
    kernel2[(1,)](np.ones(8), 8)
    assert bench2.calls == 0


def test_key_config_list_and_kernel_hash_invalidate():
    kernel, jit, bench = make()
    kernel[(1,)](np.ones(8), 8)
    kernel[(1,)](np.ones(9), 9)  # new tuning key
    assert len(cache_files()) == 2
    other, _, bench2 = make(configs=[Config({"BLOCK": b}) for b in (16, 32)])
    other[(1,)](np.ones(8), 8)
    assert bench2.calls == 2  # a different config list tunes again
    edited, _, bench3 = make(cache_key="fake-v2")
    edited[(1,)](np.ones(8), 8)
    assert bench3.calls == 3  # the kernel changed
    assert len(cache_files()) == 4


def test_corrupt_or_foreign_file_means_tune_again():
    kernel, jit, bench = make()
    kernel[(1,)](np.ones(8), 8)
    (path,) = cache_files()
    path.write_text("{ not json")
    kernel2, _, bench2 = make()
    kernel2[(1,)](np.ones(8), 8)
    assert bench2.calls == 3
    record = json.loads(path.read_text())  # rewritten whole
    record["configs"][0] = "BLOCK: 999"
    path.write_text(json.dumps(record))
    kernel3, _, bench3 = make()
    kernel3[(1,)](np.ones(8), 8)
    assert bench3.calls == 3


def test_store_is_atomic_and_load_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("TEGULA_CACHE_DIR", str(tmp_path))
    path = autotuner_cache.cache_file(["a", "b"])
    assert path.startswith(str(tmp_path / "autotune"))
    autotuner_cache.store(path, kernel="k", key="(1,)", config_strs=["c0", "c1"], best_index=1,
                          timings=[[float("inf")] * 3, [1.0, 0.5, 2.0]], failures={0: "OutOfResources"})
    assert [p.name for p in (tmp_path / "autotune").iterdir()] == [os.path.basename(path)]  # no temp left
    hit = autotuner_cache.load(path, ["c0", "c1"])
    assert hit.best_index == 1 and hit.timings[0] == [float("inf")] * 3
    assert hit.failures == {0: "OutOfResources"}
    assert autotuner_cache.load(path, ["c0"]) is None


def test_a_second_process_reuses_the_tuning(tmp_path):
    script = tmp_path / "tune_twice.py"
    script.write_text(FAKE_SOURCE + textwrap.dedent('''
        kernel, jit, bench = make()
        x = np.ones(8)
        kernel[(1,)](x, 8)
        assert (x == 2).all()
        print("benchmarks", bench.calls, "best", kernel.best_config.kwargs["BLOCK"])
    '''))
    env = {**os.environ, "TEGULA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, str(script)]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["benchmarks", "3", "best", "32"]
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["benchmarks", "0", "best", "32"]

