"""Autotuning and heuristics with real @tegula.jit kernels on the reference interpreter
(numpy arrays / CPU torch tensors): the issue's "Done means" list end to end.

These need the whole stack (frontend, interpreter, jit); test_autotune.py covers the
same logic against a fake kernel.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import AutotunerError

REPO = Path(__file__).resolve().parents[2]


@tegula.jit
def add_inplace_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + y, mask=mask)


@tegula.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def counting_bench():
    """A do_bench that runs each config 3 times and reports equal times (ties)."""

    def do_bench(fn, quantiles):
        for _ in range(3):
            fn()
        do_bench.calls += 1
        return [1.0, 1.0, 1.0]

    do_bench.calls = 0
    return do_bench


def configs(*blocks):
    return [tegula.Config({"BLOCK": b}) for b in blocks]


def launch(kernel, x, y):
    n = x.shape[0]
    kernel[lambda m: (tegula.cdiv(n, m["BLOCK"]),)](x, y, n)


def test_compiler_reports_written_arguments():
    x, y = np.zeros(10, np.float32), np.ones(10, np.float32)
    compiled = add_inplace_kernel.warmup(x, y, 10, BLOCK=16, grid=(1,))
    assert set(compiled.metadata.written_args) == {"x_ptr"}


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_inplace_accumulate_tuned_without_restore_value_equals_one_run(library):
    kernel = tegula.autotune(configs(16, 32, 64, 128), key=["n"])(add_inplace_kernel)
    if library == "numpy":
        rng = np.random.default_rng()
        x, y = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
        expected = x + y
    else:
        torch = pytest.importorskip("torch")
        x, y = torch.randn(300), torch.randn(300)
        expected = (x + y).numpy()
    launch(kernel, x, y)
    got = x if library == "numpy" else x.numpy()
    np.testing.assert_array_equal(got, expected)
    assert len(kernel.configs_timings) == 4


@pytest.mark.parametrize("hooked", [False, True])
def test_tuning_leaves_the_autograd_version_of_read_only_tensors_alone(hooked):
    # A read-only input saved by autograd must not look modified in place after tuning:
    # Triton never writes the arguments it did not store to, so backward() still works.
    # With a pre_hook on every config (mamba's init_to_zero) nothing is compiled ahead,
    # the written set is unknown and every buffer is snapshotted; restoring them must not
    # bump torch's version counters.
    torch = pytest.importorskip("torch")
    hook = (lambda nargs: None) if hooked else None
    kernel = tegula.autotune([tegula.Config({"BLOCK": b}, pre_hook=hook) for b in (16, 32)], key=["n"],
                             do_bench=counting_bench())(copy_kernel)
    src = torch.randn(40, requires_grad=True)
    loss = (src * src).sum()  # saves src for backward
    dst = torch.empty(40)
    kernel[lambda m: (tegula.cdiv(40, m["BLOCK"]),)](src.detach(), dst, 40)
    assert src._version == 0
    loss.backward()
    torch.testing.assert_close(src.grad, 2 * src.detach())
    torch.testing.assert_close(dst, src.detach())


def test_new_key_retunes_repeated_key_does_not():
    bench = counting_bench()
    kernel = tegula.autotune(configs(16, 32), key=["n"], do_bench=bench)(add_inplace_kernel)
    x, y = np.zeros(50, np.float32), np.ones(50, np.float32)
    launch(kernel, x, y)
    launch(kernel, x, y)
    assert bench.calls == 2
    x2, y2 = np.zeros(70, np.float32), np.ones(70, np.float32)
    launch(kernel, x2, y2)
    assert bench.calls == 4
    launch(kernel, x2.astype(np.float64), y2.astype(np.float64))
    assert bench.calls == 6
    np.testing.assert_array_equal(x, np.full(50, 2.0))


def test_prune_perf_model_and_top_k():
    seen = []
    bench = counting_bench()
    kernel = tegula.autotune(
        configs(16, 32, 64, 128), key=["n"], do_bench=bench,
        prune_configs_by={"early_config_prune": lambda cs, args, **kw: [c for c in cs
                                                                        if c.kwargs["BLOCK"] > 16],
                          "perf_model": lambda **kw: seen.append(kw["BLOCK"]) or kw["BLOCK"], "top_k": 2},
    )(add_inplace_kernel)
    launch(kernel, np.zeros(40, np.float32), np.ones(40, np.float32))
    assert sorted(seen) == [32, 64, 128] and bench.calls == 2
    assert {c.kwargs["BLOCK"] for c in kernel.configs_timings} == {32, 64}


def test_reset_to_zero_and_restore_value():
    kernel = tegula.autotune(configs(16, 32), key=["n"], reset_to_zero=["y_ptr"],
                             do_bench=counting_bench())(add_inplace_kernel)
    x, y = np.ones(40, np.float32), np.full(40, 5.0, np.float32)
    launch(kernel, x, y)
    # y was zeroed before every benchmark run and before the launch: x += 0
    np.testing.assert_array_equal(x, np.ones(40))
    kernel = tegula.autotune(configs(16, 32), key=["n"], restore_value=["x_ptr"],
                             do_bench=counting_bench())(add_inplace_kernel)
    x, y = np.ones(40, np.float32), np.full(40, 5.0, np.float32)
    launch(kernel, x, y)
    np.testing.assert_array_equal(x, np.full(40, 6.0))


def test_failing_configs_are_skipped_and_all_failing_is_an_error():
    kernel = tegula.autotune(configs(48, 32), key=["n"], do_bench=counting_bench())(copy_kernel)
    src, dst = np.arange(40, dtype=np.float32), np.zeros(40, np.float32)
    launch(kernel, src, dst)
    np.testing.assert_array_equal(dst, src)
    (failed, reason), = kernel.failed_configs.items()
    assert failed.kwargs["BLOCK"] == 48 and re.search(r"power.of.(2|two)", reason)
    broken = tegula.autotune(configs(48, 24), key=["n"], do_bench=counting_bench())(copy_kernel)
    with pytest.raises(AutotunerError) as info:
        launch(broken, src, dst)
    text = str(info.value)
    assert "BLOCK: 48" in text and "BLOCK: 24" in text
    assert f"{__file__}:" in text  # the located compile error names this file


def test_conflicting_meta_parameter():
    kernel = tegula.autotune(configs(16, 32), key=["n"])(copy_kernel)
    x = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="Conflicting meta-parameters: BLOCK"):
        kernel[(1,)](x, x, 8, BLOCK=16)


def test_heuristics_on_a_real_kernel():
    kernel = tegula.heuristics({"BLOCK": lambda a: tegula.next_power_of_2(a["n"])})(copy_kernel)
    src, dst = np.arange(37, dtype=np.float32), np.zeros(37, np.float32)
    kernel[(1,)](src, dst, 37)
    np.testing.assert_array_equal(dst, src)


def test_autotune_over_heuristics():
    @tegula.jit
    def scaled_copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr, SCALE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask) * SCALE, mask=mask)

    kernel = tegula.autotune(configs(16, 32), key=["n"], do_bench=counting_bench())(
        tegula.heuristics({"SCALE": lambda a: a["BLOCK"] // 8})(scaled_copy))
    src, dst = np.ones(40, np.float32), np.zeros(40, np.float32)
    kernel[lambda m: (tegula.cdiv(40, m["BLOCK"]),)](src, dst, 40)
    assert kernel.best_config.kwargs["BLOCK"] == 16  # tie: first in order
    np.testing.assert_array_equal(dst, np.full(40, 2.0))


def test_heuristics_over_autotune():
    @tegula.jit
    def fill(dst_ptr, n, BLOCK: tl.constexpr, VALUE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst_ptr + offs, tl.full((BLOCK,), VALUE, tl.float32), mask=offs < n)

    tuned = tegula.autotune(configs(16, 32), key=["n"], do_bench=counting_bench())(fill)
    kernel = tegula.heuristics({"VALUE": lambda a: float(a["n"])})(tuned)
    dst = np.zeros(40, np.float32)
    kernel[lambda m: (tegula.cdiv(40, m["BLOCK"]),)](dst, 40)
    np.testing.assert_array_equal(dst, np.full(40, 40.0))


def test_print_autotuning(monkeypatch, capsys):
    monkeypatch.setenv("TEGULA_PRINT_AUTOTUNING", "1")
    kernel = tegula.autotune(configs(16, 32), key=["n"])(copy_kernel)
    x = np.zeros(40, np.float32)
    launch(kernel, x, x.copy())
    out = capsys.readouterr().out
    assert "BLOCK: 16" in out and "BLOCK: 32" in out and "finished after" in out


SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import tegula
    import tegula.language as tl

    @tegula.jit
    def add_inplace_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    def do_bench(fn, quantiles):
        fn()
        do_bench.calls += 1
        return [float(do_bench.calls)] * 3

    do_bench.calls = 0
    kernel = tegula.autotune([tegula.Config({"BLOCK": b}) for b in (16, 32, 64)], key=["n"],
                             do_bench=do_bench, cache_results=True)(add_inplace_kernel)
    x, y = np.zeros(100, np.float32), np.ones(100, np.float32)
    kernel[lambda m: (tegula.cdiv(100, m["BLOCK"]),)](x, y, 100)
    assert (x == 1).all()
    print("benchmarks", do_bench.calls, "best", kernel.best_config.kwargs["BLOCK"])
    print("failed", {str(c): r for c, r in kernel.failed_configs.items()}, file=sys.stderr)
''')


def test_disk_cache_is_reused_by_a_second_process(tmp_path):
    script = tmp_path / "tune.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TEGULA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, str(script)]
    runs = [subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    # (a config that failed says why on stderr: once, under a loaded CI machine, the
    # first process benchmarked one config of three; not reproduced since)
    assert runs[0].stdout.split() == ["benchmarks", "3", "best", "16"], runs[0].stderr
    assert runs[1].stdout.split() == ["benchmarks", "0", "best", "16"], runs[1].stderr


def test_configs_differing_only_in_warps_and_stages_compile_and_time_once_on_the_host():
    """On the CPU backend and the interpreter num_warps / num_stages change nothing: a
    library's 12 configs over two block sizes are two programs, compiled and timed once."""

    @tegula.jit
    def scale_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst_ptr + offs, 2 * tl.load(src_ptr + offs, mask=mask), mask=mask)

    cfgs = [tegula.Config({"BLOCK": b}, num_warps=w, num_stages=s) for b in (16, 32) for w in (2, 4, 8) for s in (2, 3)]
    bench = counting_bench()
    kernel = tegula.autotune(cfgs, key=["n"], do_bench=bench)(scale_kernel)
    src = np.random.default_rng(7).standard_normal(77).astype(np.float32)
    dst = np.zeros_like(src)
    launch(kernel, src, dst)
    np.testing.assert_array_equal(dst, 2 * src)
    assert bench.calls == 2
    assert len(scale_kernel.kernel_cache) == 2
    assert set(kernel.configs_timings) == set(cfgs) and kernel.best_config in cfgs


def test_equivalent_configs_keep_meta_parameters_hooks_and_other_options_apart():
    from tegula.runtime.autotuner import equivalent_configs

    hook = lambda nargs: None  # noqa: E731
    cfgs = [tegula.Config({"B": 16}, num_warps=4), tegula.Config({"B": 16}, num_warps=8),
            tegula.Config({"B": 32}, num_warps=4), tegula.Config({"B": 16}, num_warps=4, pre_hook=hook),
            tegula.Config({"B": 16}, num_stages=1, maxnreg=128), tegula.Config({"B": 16, "C": 1})]
    ignored = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})
    assert equivalent_configs(cfgs, ignored) == [[0, 1, 4], [2], [3], [5]]
    assert equivalent_configs(cfgs, frozenset()) == [[i] for i in range(6)]
