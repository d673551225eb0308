"""Autotuner semantics against a fake JITFunction (no compiler needed).

The fake records every warmup (compile) and run, executes a small Python body on the
arguments, and reports `metadata.written_args` like the real compiler. A custom
`do_bench` returns scripted timings, so the choice logic is tested deterministically.
The same behaviours with real @tegula.jit kernels are in test_autotune_e2e.py.
"""
from __future__ import annotations

import io
import math
import pickle
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from tegula.errors import AutotunerError, CompilationError, KernelArgumentError, OutOfResources
from tegula.runtime.autotuner import Config, autotune
from tegula.runtime.autotuner_report import TuningProgress, choose_best, contenders
from tegula.runtime.heuristics import heuristics


class FakeJIT:
    """Stands in for JITFunction: arg_names, run, warmup, cache_key, fn, __name__."""

    _tegula_jit = True

    def __init__(self, body, arg_names, written=("x",), fail=None, cache_key="fake-v1"):
        self.fn = body
        self.__name__ = body.__name__
        self.arg_names = list(arg_names)
        self.written = written
        self.fail = fail  # meta -> exception to raise at compile time, or None
        self.cache_key = cache_key
        self.runs: list[dict] = []
        self.warmups: list[dict] = []
        self.events: list[tuple] = []
        self.threads: set[str] = set()

    def _split(self, args, kwargs):
        named = dict(zip(self.arg_names, args))
        meta = {}
        for k, v in kwargs.items():
            (named if k in self.arg_names else meta)[k] = v
        return named, meta

    def warmup(self, *args, grid, **kwargs):
        named, meta = self._split(args, kwargs)
        self.warmups.append(meta)
        self.events.append(("warmup", meta.get("BLOCK")))
        self.threads.add(threading.current_thread().name)
        exc = self.fail(meta) if self.fail else None
        if exc is not None:
            raise exc
        return SimpleNamespace(metadata=SimpleNamespace(written_args=self.written))

    def run(self, *args, grid, warmup=False, **kwargs):
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        named, meta = self._split(args, kwargs)
        exc = self.fail(meta) if self.fail else None
        if exc is not None:
            raise exc
        self.runs.append(meta)
        self.events.append(("run", meta.get("BLOCK")))
        self.fn(named, meta)
        return SimpleNamespace(metadata=SimpleNamespace(written_args=self.written))

    def __getitem__(self, grid):
        return lambda *a, **k: self.run(*a, grid=grid, warmup=False, **k)


def add_inplace(named, meta):
    named["x"] += named["y"]


def make_bench(jit, time_of, reps=3):
    """A do_bench that runs the call `reps` times and reports time_of(meta) ms."""

    def do_bench(fn, quantiles):
        for _ in range(reps):
            fn()
        t = time_of(jit.runs[-1])
        do_bench.calls += 1
        return t if isinstance(t, list) else [t, t, t]

    do_bench.calls = 0
    return do_bench


BLOCKS = [16, 32, 64, 128]
CONFIGS = [Config({"BLOCK": b}) for b in BLOCKS]
FAST = {16: 4.0, 32: 2.0, 64: 1.0, 128: 3.0}


def tuned_add(configs=CONFIGS, times=FAST, written=("x",), **autotune_kwargs):
    jit = FakeJIT(add_inplace, ["x", "y", "n"], written=written)
    bench = make_bench(jit, lambda meta: times[meta["BLOCK"]])
    kernel = autotune(configs, key=["n"], do_bench=bench, **autotune_kwargs)(jit)
    return kernel, jit, bench


def arrays(n=10, dtype=np.float32):
    rng = np.random.default_rng()
    return rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)


# ---------------------------------------------------------------- Config

def test_config_all_kwargs_str_eq_hash_and_reconstruction():
    c = Config({"BLOCK": 64}, num_warps=8, num_stages=2)
    assert c.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_ctas": 1, "num_stages": 2}
    assert str(c) == "BLOCK: 64, num_warps: 8, num_ctas: 1, num_stages: 2, maxnreg: None"
    assert Config({"BLOCK": 64}, num_warps=8, num_stages=2) == c
    assert len({c, Config({"BLOCK": 64}, num_warps=8, num_stages=2)}) == 1
    assert Config(**c.__dict__) == c
    assert pickle.loads(pickle.dumps(c)) == c
    assert Config({"BLOCK": 64}, maxnreg=128).all_kwargs()["maxnreg"] == 128
    assert Config({}).all_kwargs() == {"num_warps": 4, "num_ctas": 1, "num_stages": 3}


# ---------------------------------------------------------------- tuning key and caching

def test_picks_fastest_and_records_timings():
    kernel, jit, bench = tuned_add()
    x, y = arrays()
    kernel[(1,)](x, y, 10)
    assert kernel.best_config == Config({"BLOCK": 64})
    assert set(kernel.configs_timings) == set(CONFIGS)
    assert kernel.configs_timings[Config({"BLOCK": 32})] == [2.0, 2.0, 2.0]
    assert jit.runs[-1]["BLOCK"] == 64 and jit.runs[-1]["num_warps"] == 4
    assert bench.calls == 4
    assert kernel.bench_time >= 0.0


def test_new_key_retunes_repeated_key_does_not():
    kernel, jit, bench = tuned_add()
    x, y = arrays()
    kernel[(1,)](x, y, 10)
    assert bench.calls == 4
    kernel[(1,)](x, y, 10)
    assert bench.calls == 4  # same key: cached
    x2, y2 = arrays(20)
    kernel[(1,)](x2, y2, 20)
    assert bench.calls == 8  # new value of a key argument
    x3, y3 = arrays(20, np.float64)
    kernel[(1,)](x3, y3, 20)
    assert bench.calls == 12  # same n, new dtypes
    assert set(kernel.cache) == {(10, "float32", "float32"), (20, "float32", "float32"),
                                 (20, "float64", "float64")}


def test_key_argument_passed_by_keyword():
    kernel, jit, bench = tuned_add()
    x, y = arrays()
    kernel[(1,)](x, y, n=10)
    kernel[(1,)](x, y, 10)
    assert bench.calls == 4
    assert list(kernel.cache) == [(10, "float32", "float32")]


def test_single_config_never_benchmarks():
    kernel, jit, bench = tuned_add(configs=[Config({"BLOCK": 32})])
    x, y = arrays()
    x0 = x.copy()
    kernel[(1,)](x, y, 10)
    assert bench.calls == 0 and jit.warmups == []
    assert kernel.best_config == Config({"BLOCK": 32})
    np.testing.assert_array_equal(x, x0 + y)


def test_no_configs_means_one_default_config():
    kernel, jit, bench = tuned_add(configs=[])
    kernel[(1,)](*arrays(), 10)
    assert kernel.best_config == Config({}, num_warps=4, num_stages=3, num_ctas=1)


# ---------------------------------------------------------------- repeatable choice

def test_ties_within_noise_resolve_by_config_order():
    # [median, p20, p80]: config 1 is fastest, but config 0's spread overlaps it and its
    # median is within 1%.
    assert choose_best([[1.005, 0.98, 1.10], [1.00, 0.95, 1.02], [1.001, 0.5, 3.0]]) == 0
    # Overlapping spreads but a median 5% slower: no tie (noise must not cost more than 1%).
    assert choose_best([[1.05, 0.98, 1.10], [1.00, 0.95, 1.02], [0.99, 0.5, 3.0]]) == 2
    # The attention forward's tuning on an H200 (ms): the fastest config's spread reached
    # the second's, 7.8% slower, listed first.
    assert choose_best([[2.086, 1.93, 2.2], [1.935, 1.90, 2.1]]) == 1
    # Clearly separated: the fastest wins even when later in the list.
    assert choose_best([[2.0, 1.9, 2.1], [1.0, 0.95, 1.05]]) == 1
    # Exact equality without spread: first in order.
    assert choose_best([3.0, 1.0, 1.0]) == 1
    assert choose_best([[math.inf] * 3, [math.inf] * 3]) is None


def test_contenders_are_the_configs_near_the_fastest():
    # medians within CONTEST_MARGIN (12%) of the fastest one's; none when it stands alone
    assert contenders([[1.11, 1.0, 1.2], [1.0, 0.9, 1.1], [1.13, 1.0, 1.2], [math.inf] * 3]) == [0, 1]
    assert contenders([2.0, 1.0, 1.5]) == []
    assert contenders([[math.inf] * 3]) == []


def test_the_default_benchmarker_times_the_contenders_again(monkeypatch):
    """A GPU warming up as it tunes: the first config timed reads 10% fast. Timed once,
    config 16 (really 1.0 ms) would beat config 32 (0.97 ms); the contenders' second
    timings, back to back, choose 32. The others are not timed again."""
    import tegula.testing

    jit = FakeJIT(add_inplace, ["x", "y", "n"])
    real = {16: 1.0, 32: 0.97, 64: 3.0}
    timed = []

    def drifting_bench(fn, warmup=25, rep=100, quantiles=None, device=None):
        fn()
        block = jit.runs[-1]["BLOCK"]
        timed.append(block)
        t = real[block] * (0.9 if len(timed) == 1 else 1.0)
        return [t, t, t]

    monkeypatch.setattr(tegula.testing, "do_bench", drifting_bench)
    kernel = autotune([Config({"BLOCK": b}) for b in (16, 32, 64)], key=["n"])(jit)
    x, y = arrays()
    kernel[(1,)](x, y, 10)
    assert timed == [16, 32, 64, 32, 16]  # the near-fastest again, in reverse order
    assert kernel.best_config.kwargs["BLOCK"] == 32
    assert kernel.configs_timings[kernel.best_config][0] == pytest.approx(0.97)


def test_a_users_own_benchmarker_times_each_config_once():
    kernel, jit, bench = tuned_add(times={16: 1.0, 32: 1.01, 64: 5.0, 128: 5.0})
    kernel[(1,)](*arrays(), 10)
    assert bench.calls == 4


def test_noisy_timings_choose_the_same_config_every_time():
    # medians within 1% of each other, spreads overlapping: the first of them
    times = {16: [1.008, 0.9, 1.2], 32: [1.004, 0.9, 1.2], 64: [1.0, 0.9, 1.2], 128: [5.0, 4.9, 5.1]}
    for _ in range(3):
        kernel, jit, bench = tuned_add(times=times)
        kernel[(1,)](*arrays(), 10)
        assert kernel.best_config == Config({"BLOCK": 16})


# ---------------------------------------------------------------- pruning

def test_early_config_prune_gets_configs_named_args_and_kwargs():
    seen = {}

    def prune(configs, named_args, **kwargs):
        seen.update(named=sorted(named_args), kwargs=sorted(kwargs))
        return [c for c in configs if c.kwargs["BLOCK"] <= 32]

    kernel, jit, bench = tuned_add(prune_configs_by={"early_config_prune": prune})
    kernel[(1,)](*arrays(), 10)
    assert seen == {"named": ["n", "x", "y"], "kwargs": ["grid", "warmup"]}
    assert {m["BLOCK"] for m in jit.warmups} == {16, 32}
    assert kernel.best_config == Config({"BLOCK": 32})


def test_early_config_prune_returning_nothing_is_an_error():
    kernel, jit, bench = tuned_add(prune_configs_by={"early_config_prune": lambda c, a, **k: []})
    with pytest.raises(AutotunerError, match="early_config_prune"):
        kernel[(1,)](*arrays(), 10)


def test_early_prune_to_one_config_skips_benchmarking():
    kernel, jit, bench = tuned_add(prune_configs_by={"early_config_prune": lambda c, a, **k: c[:1]})
    kernel[(1,)](*arrays(), 10)
    assert bench.calls == 0 and kernel.best_config == CONFIGS[0]


@pytest.mark.parametrize("top_k, benched", [(2, {128, 64}), (0.5, {128, 64}), (1.0, {16, 32, 64, 128})])
def test_perf_model_and_top_k(top_k, benched):
    calls = []

    def perf_model(**kwargs):
        calls.append(sorted(kwargs))
        return -kwargs["BLOCK"]  # predicts bigger blocks are faster

    kernel, jit, bench = tuned_add(prune_configs_by={"perf_model": perf_model, "top_k": top_k})
    kernel[(1,)](*arrays(), 10)
    assert {m["BLOCK"] for m in jit.runs[:-1]} == benched
    if top_k != 1.0:
        assert "x" in calls[0] and "BLOCK" in calls[0] and "num_warps" in calls[0] and "grid" in calls[0]


def test_top_k_of_wrong_type():
    kernel, jit, bench = tuned_add(prune_configs_by={"perf_model": lambda **k: 0, "top_k": "2"})
    with pytest.raises(TypeError, match="top_k"):
        kernel[(1,)](*arrays(), 10)


# ---------------------------------------------------------------- hooks

def test_hook_order():
    log = []

    def body(named, meta):
        log.append(("kernel", meta["BLOCK"]))

    jit = FakeJIT(body, ["x", "n"])
    bench = make_bench(jit, lambda m: float(m["BLOCK"]), reps=1)
    configs = [Config({"BLOCK": b}, pre_hook=lambda a, b=b: log.append(("config_pre", b))) for b in (1, 2)]
    kernel = autotune(configs, key=["n"], do_bench=bench,
                      pre_hook=lambda a, reset_only=False: log.append(("pre", reset_only, a["BLOCK"])),
                      post_hook=lambda a, exception: log.append(("post", exception, a["BLOCK"])))(jit)
    kernel[(1,)](np.zeros(4), 4)
    assert log == [
        ("config_pre", 1), ("pre", False, 1), ("kernel", 1), ("post", None, 1),
        ("config_pre", 2), ("pre", False, 2), ("kernel", 2), ("post", None, 2),
        ("pre", True, 1),  # after tuning, as Triton: reset only, with the chosen config
        ("config_pre", 1), ("kernel", 1),  # the real launch
    ]
    log.clear()
    kernel[(1,)](np.zeros(4), 4)
    assert log == [("config_pre", 1), ("kernel", 1)]


def test_hooks_installed_by_a_subclass_run_as_in_triton():
    """A subclass may set `self.pre_hook`/`self.post_hook` after `__init__` (FLA's
    CachedAutotuner does, for restore_value of optional pointers): Triton calls
    `self.pre_hook` before each benchmarked run whether or not `pre_hook=` was given,
    and that subclass's post hook reads what its pre hook stored."""
    from tegula.runtime.autotuner import Autotuner

    class Saving(Autotuner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

            def pre(kw, reset_only=False):
                if not reset_only:
                    self.restore_copies = {n: kw[n].copy() for n in self.restore_value}
            self.log = []

            def post(kw, exception):
                for n, copy in self.restore_copies.items():
                    kw[n][...] = copy
                self.log.append(("post", sorted(self.restore_copies)))
                self.restore_copies = {}
            self.pre_hook, self.post_hook = pre, post

    def body(named, meta):
        named["x"] += 1

    jit = FakeJIT(body, ["x", "n"], written=())
    kernel = Saving(jit, jit.arg_names, CONFIGS[:2], ["n"], None, ["x"], do_bench=make_bench(jit, lambda m: 1.0))
    x = np.arange(4.0)
    kernel[(1,)](x, 4)
    assert kernel.log == [("post", ["x"])] * 6  # 3 runs per config, each restored by the subclass
    np.testing.assert_array_equal(x, np.arange(4.0) + 1)


def test_a_subclass_may_set_its_name():
    """FlagGems' LibTuner subclasses Triton's Autotuner with the positional arguments of
    Triton's `__init__` and assigns `self.__name__` (Triton's has no such property):
    it is a plain attribute here too, the kernel's name by default."""
    from tegula.runtime.autotuner import Autotuner

    class Named(Autotuner):
        def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=None,
                     post_hook=None, prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False):
            super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook, post_hook,
                             prune_configs_by, warmup, rep, use_cuda_graph)
            assert self.__name__ == self.base_fn.__name__
            self.__name__ = "renamed_" + self.base_fn.__name__

    def body(named, meta):
        named["x"] += 1

    jit = FakeJIT(body, ["x", "n"], written=())
    kernel = Named(jit, jit.arg_names, CONFIGS[:1], ["n"], None, None)
    assert kernel.__name__ == "renamed_" + kernel.base_fn.__name__
    x = np.arange(4.0)
    kernel[(1,)](x, 4)
    np.testing.assert_array_equal(x, np.arange(4.0) + 1)


def test_hooks_see_all_arguments_and_meta():
    seen = []
    kernel, jit, bench = tuned_add(pre_hook=lambda a, reset_only=False: seen.append(sorted(a)))
    kernel[(1,)](*arrays(), 10)
    assert seen[0] == sorted(["x", "y", "n", "grid", "warmup", "BLOCK", "num_warps", "num_ctas",
                              "num_stages"])


def test_post_hook_gets_the_exception():
    got = []

    def boom(named, meta):
        raise RuntimeError("kernel crashed")

    jit = FakeJIT(boom, ["x", "n"])
    kernel = autotune(CONFIGS[:2], key=["n"], do_bench=make_bench(jit, lambda m: 1.0),
                      post_hook=lambda a, exception: got.append(exception))(jit)
    with pytest.raises(RuntimeError, match="kernel crashed"):
        kernel[(1,)](np.zeros(4), 4)
    assert isinstance(got[0], RuntimeError)


# ---------------------------------------------------------------- data integrity

def test_inplace_kernel_tuned_without_restore_value_matches_one_untuned_run():
    kernel, jit, bench = tuned_add()
    x, y = arrays(1000)
    expected = x + y  # one untuned run of x += y
    kernel[(1,)](x, y, 1000)
    assert len(jit.runs) == 4 * 3 + 1  # it really ran 13 times
    np.testing.assert_array_equal(x, expected)


def test_inplace_kernel_with_torch_tensors():
    torch = pytest.importorskip("torch")
    kernel, jit, bench = tuned_add()
    x, y = torch.randn(100), torch.randn(100)
    expected = x + y
    kernel[(1,)](x, y, 100)
    assert torch.equal(x, expected)


def test_unknown_written_args_snapshots_every_buffer():
    # A backend that does not report written_args: everything array-like is saved.
    kernel, jit, bench = tuned_add(written=None)
    x, y = arrays()
    expected = x + y
    kernel[(1,)](x, y, 10)
    np.testing.assert_array_equal(x, expected)


def test_only_written_args_are_snapshotted(monkeypatch):
    from tegula.runtime import arg_snapshot

    taken = []
    original = arg_snapshot.ArgSnapshot.take.__func__

    def spy(cls, named, names, tracked=()):
        snap = original(cls, named, names, tracked)
        taken.append(snap.names)
        return snap

    monkeypatch.setattr(arg_snapshot.ArgSnapshot, "take", classmethod(spy))
    kernel, jit, bench = tuned_add()
    kernel[(1,)](*arrays(), 10)
    assert taken == [["x"]]


def test_restore_value_restores_after_every_run():
    seen = []

    def body(named, meta):
        seen.append(named["x"].copy())
        named["x"] += 1

    jit = FakeJIT(body, ["x", "n"], written=())  # pretend the compiler did not see the write
    kernel = autotune(CONFIGS[:2], key=["n"], restore_value=["x"],
                      do_bench=make_bench(jit, lambda m: 1.0))(jit)
    x = np.arange(4.0)
    kernel[(1,)](x, 4)
    for s in seen:
        np.testing.assert_array_equal(s, np.arange(4.0))
    np.testing.assert_array_equal(x, np.arange(4.0) + 1)


def test_reset_to_zero_before_every_run_and_before_the_launch():
    seen = []

    def body(named, meta):
        seen.append(named["out"].copy())
        named["out"] += named["x"]

    jit = FakeJIT(body, ["x", "out", "n"], written=("out",))
    kernel = autotune(CONFIGS[:2], key=["n"], reset_to_zero=["out"],
                      do_bench=make_bench(jit, lambda m: 1.0))(jit)
    x, out = np.arange(4.0), np.full(4, 7.0)
    kernel[(1,)](x, out, 4)
    assert all((s == 0).all() for s in seen)
    np.testing.assert_array_equal(out, x)  # zeroed after tuning, then one launch


def test_reset_to_zero_still_works_with_a_user_pre_hook():
    seen = []

    def body(named, meta):
        seen.append(named["out"].copy())
        named["out"] += 1

    jit = FakeJIT(body, ["out", "n"], written=("out",))
    kernel = autotune(CONFIGS[:2], key=["n"], reset_to_zero=["out"],
                      pre_hook=lambda a, reset_only=False: None, do_bench=make_bench(jit, lambda m: 1.0))(jit)
    kernel[(1,)](np.full(3, 5.0), 3)
    assert all((s == 0).all() for s in seen)


def test_runtime_error_during_benchmark_propagates_and_restores_data():
    def body(named, meta):
        named["x"] += 100
        if meta["BLOCK"] == 32:
            raise IndexError("out of bounds in the kernel")

    jit = FakeJIT(body, ["x", "n"])
    kernel = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: 1.0))(jit)
    x = np.arange(4.0)
    with pytest.raises(IndexError):
        kernel[(1,)](x, 4)
    np.testing.assert_array_equal(x, np.arange(4.0))


# ---------------------------------------------------------------- failures and errors

def failing(meta):
    if meta["BLOCK"] == 16:
        return CompilationError("arange's range must be a power of 2")
    if meta["BLOCK"] == 128:
        return OutOfResources(262144, 232448, "shared memory")
    return None


def test_failing_configs_are_skipped_with_reasons():
    jit = FakeJIT(add_inplace, ["x", "y", "n"], fail=failing)
    kernel = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: FAST[m["BLOCK"]]))(jit)
    x, y = arrays()
    kernel[(1,)](x, y, 10)
    assert kernel.best_config == Config({"BLOCK": 64})
    assert set(kernel.failed_configs) == {CONFIGS[0], CONFIGS[3]}
    assert "power of 2" in kernel.failed_configs[CONFIGS[0]]
    assert "shared memory" in kernel.failed_configs[CONFIGS[3]]
    assert kernel.configs_timings[CONFIGS[3]] == [math.inf] * 3
    assert {m["BLOCK"] for m in jit.runs} == {32, 64}  # failed configs never ran


def test_no_surviving_config_raises_autotuner_error_listing_reasons():
    jit = FakeJIT(add_inplace, ["x", "y", "n"],
                  fail=lambda m: OutOfResources(m["BLOCK"] * 4096, 232448, "shared memory")
                  if m["BLOCK"] > 32 else CompilationError("bad"))
    kernel = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: 1.0))(jit)
    with pytest.raises(AutotunerError) as info:
        kernel[(1,)](*arrays(), 10)
    text = str(info.value)
    assert "add_inplace" in text
    for c in CONFIGS:
        assert str(c) in text
    assert "CompilationError: bad" in text and "out of resource: shared memory" in text


def test_wrong_launch_arguments_are_not_blamed_on_configs():
    jit = FakeJIT(add_inplace, ["x", "y", "n"], fail=lambda m: KernelArgumentError("expected 3 arguments"))
    kernel = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: 1.0))(jit)
    with pytest.raises(KernelArgumentError):
        kernel[(1,)](*arrays(), 10)


def test_passing_a_tuned_meta_parameter_is_an_error():
    kernel, jit, bench = tuned_add()
    with pytest.raises(ValueError, match="Conflicting meta-parameters: BLOCK"):
        kernel[(1,)](*arrays(), 10, BLOCK=32)
    with pytest.raises(ValueError, match="num_warps"):
        kernel[(1,)](*arrays(), 10, num_warps=2)


def test_bad_names_in_decorator():
    jit = FakeJIT(add_inplace, ["x", "y", "n"])
    with pytest.raises(ValueError, match="reset_to_zero"):
        autotune(CONFIGS, key=["n"], reset_to_zero=["out"])(jit)
    with pytest.warns(UserWarning, match="'N'"):
        autotune(CONFIGS, key=["N"])(jit)


# ---------------------------------------------------------------- compile phase

def test_all_candidates_compile_in_parallel_before_timing():
    kernel, jit, bench = tuned_add()
    kernel[(1,)](*arrays(), 10)
    kinds = [e[0] for e in jit.events]
    assert kinds[:4] == ["warmup"] * 4 and "warmup" not in kinds[4:]
    assert any(t.startswith("tegula-autotune") for t in jit.threads)


def test_warmup_compiles_every_pruned_config():
    kernel, jit, bench = tuned_add()
    compiled = kernel.warmup(*arrays(), 10, grid=(1,))
    assert len(compiled) == 4 and {m["BLOCK"] for m in jit.warmups} == set(BLOCKS)
    assert jit.runs == []


def test_default_benchmarker_times_on_the_host():
    jit = FakeJIT(add_inplace, ["x", "y", "n"])
    kernel = autotune(CONFIGS[:2], key=["n"], warmup=1, rep=2)(jit)
    x, y = arrays()
    expected = x + y
    kernel[(1,)](x, y, 10)
    t = kernel.configs_timings[CONFIGS[0]]
    assert len(t) == 3 and all(v >= 0 for v in t)
    np.testing.assert_array_equal(x, expected)


# ---------------------------------------------------------------- reporting

def test_print_autotuning(monkeypatch, capsys):
    monkeypatch.setenv("TEGULA_PRINT_AUTOTUNING", "1")
    jit = FakeJIT(add_inplace, ["x", "y", "n"], fail=failing)
    kernel = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: FAST[m["BLOCK"]]))(jit)
    kernel[(1,)](*arrays(), 10)
    out = capsys.readouterr().out
    for c in CONFIGS:
        assert str(c) in out
    assert "1.0000 ms" in out and "failed: CompilationError" in out
    assert "finished after" in out and "best config selected: BLOCK: 64" in out
    kernel[(1,)](*arrays(), 10)
    assert capsys.readouterr().out == ""  # cached key: silent


def test_triton_print_autotuning_alias(monkeypatch, capsys):
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    kernel, jit, bench = tuned_add()
    kernel[(1,)](*arrays(), 10)
    assert "best config selected" in capsys.readouterr().out


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal_after_the_delay():
    tty = FakeTTY()
    p = TuningProgress("k", 4, stream=tty, delay=0.0)
    p.update(2, "benchmarked")
    p.close()
    assert "autotuning k [" in tty.getvalue() and "2/4" in tty.getvalue()
    assert tty.getvalue().endswith("\n")
    pipe = io.StringIO()
    p = TuningProgress("k", 4, stream=pipe, delay=0.0)
    p.update(2, "benchmarked")
    p.close()
    assert pipe.getvalue() == ""
    slow = FakeTTY()
    p = TuningProgress("k", 4, stream=slow, delay=60.0)
    p.update(2, "benchmarked")
    p.close()
    assert slow.getvalue() == ""


# ---------------------------------------------------------------- heuristics stacking

def test_autotune_over_heuristics_sees_config_values():
    seen = []
    jit = FakeJIT(add_inplace, ["x", "y", "n"])

    def half(args):
        seen.append(args["BLOCK"])
        return args["BLOCK"] // 2

    inner = heuristics({"HALF": half})(jit)
    kernel = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: FAST[m["BLOCK"]]))(inner)
    kernel[(1,)](*arrays(), 10)
    assert {m["HALF"] for m in jit.warmups} == {8, 16, 32, 64}
    assert jit.runs[-1]["HALF"] == 32 and jit.runs[-1]["BLOCK"] == 64
    assert kernel.base_fn is add_inplace and kernel.__name__ == "add_inplace"


def test_heuristics_over_autotune_feeds_the_tuner():
    jit = FakeJIT(add_inplace, ["x", "y", "n"])
    tuned = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: FAST[m["BLOCK"]]))(jit)
    kernel = heuristics({"EVEN": lambda a: a["n"] % 2 == 0})(tuned)
    kernel[(1,)](*arrays(), 10)
    assert all(m["EVEN"] is True for m in jit.runs)
    assert tuned.best_config == Config({"BLOCK": 64})
    clash = heuristics({"BLOCK": lambda a: 16})(tuned)
    with pytest.raises(ValueError, match="Conflicting meta-parameters: BLOCK"):
        clash[(1,)](*arrays(), 10)


def test_a_config_the_compiler_fails_on_is_skipped_with_a_warning():
    """A fault of the compiler's own (a pass failing on valid IR, or an exception tegula
    does not raise on purpose) skips the config like any compile failure, but warns: it
    is a bug, and the config lost may have been the fastest (fla's prepare_wy_repr_bwd
    lost its 4- and 8-warp configs to one without a word). A config's own failure
    (CompilationError, OutOfResources) stays quiet."""
    from tegula.passes import PassError

    def fail(meta):
        if meta["BLOCK"] == 16:
            return PassError("cuda.stage_registers", "ValueError: x is not in list")
        if meta["BLOCK"] == 32:
            return KeyError("slot")
        return failing(meta)

    jit = FakeJIT(add_inplace, ["x", "y", "n"], fail=fail)
    kernel = autotune(CONFIGS, key=["n"], do_bench=make_bench(jit, lambda m: FAST[m["BLOCK"]]))(jit)
    with pytest.warns(UserWarning) as record:
        kernel[(1,)](*arrays(), 10)
    texts = [str(w.message) for w in record]
    assert len(texts) == 2 and all("a tegula bug" in t and "add_inplace" in t for t in texts)
    assert any("cuda.stage_registers" in t and str(CONFIGS[0]) in t for t in texts)
    assert any("KeyError" in t and str(CONFIGS[1]) in t for t in texts)
    assert kernel.best_config == Config({"BLOCK": 64})


def test_a_config_compiled_when_first_timed_warns_of_a_compiler_fault_too():
    """A config with a pre_hook compiles when first timed (after its hook ran), not
    ahead: a compiler fault there is skipped with the same warning."""
    from tegula.passes import PassError

    hooked = [Config({"BLOCK": b}, pre_hook=lambda nargs: None) for b in (16, 32, 64)]
    jit = FakeJIT(add_inplace, ["x", "y", "n"],
                  fail=lambda m: PassError("cuda.lower", "KeyError: 'slot'") if m["BLOCK"] == 32 else None)
    kernel = autotune(hooked, key=["n"], do_bench=make_bench(jit, lambda m: FAST[m["BLOCK"]]))(jit)
    with pytest.warns(UserWarning, match="a tegula bug") as record:
        kernel[(1,)](*arrays(), 10)
    assert len(record) == 1 and str(hooked[1]) in str(record[0].message)
    assert set(kernel.failed_configs) == {hooked[1]}
