"""tegula.testing (do_bench, assert_close, Benchmark/perf_report) and
tegula.runtime.driver. Host-side tests run everywhere; the GPU ones where a GPU is."""
from __future__ import annotations

import csv
import importlib.util
import time

import numpy as np
import pytest

from tegula import testing
from tegula.runtime import driver as driver_module
from tegula.runtime.driver import CpuDriver, CudaDriver, HostDeviceInterface, driver

HAS_GPU = CudaDriver.is_active()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU")


# ---------------------------------------------------------------- do_bench

def test_do_bench_on_the_host_measures_time():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    ms = testing.do_bench(fn, warmup=5, rep=20, device="cpu")
    assert 1.5 < ms < 50
    assert len(calls) >= 3  # first run, estimate, at least one repetition


def test_do_bench_quantiles_and_return_modes():
    fn = lambda: sum(range(200))
    q = testing.do_bench(fn, warmup=1, rep=5, quantiles=(0.5, 0.2, 0.8), device="cpu")
    assert len(q) == 3 and q[1] <= q[0] <= q[2]
    assert isinstance(testing.do_bench(fn, warmup=1, rep=5, quantiles=[0.5], device="cpu"), float)
    allt = testing.do_bench(fn, warmup=1, rep=5, return_mode="all", device="cpu")
    assert isinstance(allt, list) and len(allt) >= 1
    for mode in ("min", "max", "mean", "median"):
        assert testing.do_bench(fn, warmup=1, rep=2, return_mode=mode, device="cpu") >= 0
    with pytest.raises(ValueError, match="return_mode"):
        testing.do_bench(fn, return_mode="p99")


def test_do_bench_clears_gradients_before_each_repetition():
    class T:
        grad = "stale"

    t = T()
    seen = []

    def fn():
        seen.append(t.grad)
        t.grad = "stale"

    testing.do_bench(fn, warmup=0, rep=1, grad_to_none=[t], device="cpu")
    assert seen[-1] is None


def test_quantiles_match_numpy_linear_interpolation():
    xs = list(np.random.default_rng().random(17))
    qs = (0.0, 0.2, 0.5, 0.8, 1.0)
    np.testing.assert_allclose(testing._quantiles(xs, qs), np.quantile(xs, qs))


def test_do_bench_cudagraph_falls_back_to_the_host_clock_without_a_gpu():
    if HAS_GPU:
        pytest.skip("a GPU is present: the fallback is not taken")
    assert testing.do_bench_cudagraph(lambda: None, rep=2) >= 0


# ---------------------------------------------------------------- assert_close

def test_assert_close_numpy_and_scalars():
    x = np.random.default_rng().random(100).astype(np.float32)
    testing.assert_close(x, x + 1e-3)
    with pytest.raises(AssertionError):
        testing.assert_close(x, x + 0.1)
    testing.assert_close(x, x * 1.01, atol=0, rtol=0.02)
    testing.assert_close(1.0, 1.005)
    with pytest.raises(AssertionError, match="my message 1.0 is not close to 2.0"):
        testing.assert_close(1.0, 2.0, err_msg="my message")
    testing.assert_close(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))


def test_assert_close_callable_tolerances_get_the_dtype():
    got = []
    x = np.ones(4, dtype=np.float16)
    testing.assert_close(x, x, atol=lambda d: got.append(d) or 0.0, rtol=lambda d: 0.0)
    assert got == [np.dtype(np.float16)]


def test_assert_close_torch_tensors():
    torch = pytest.importorskip("torch")
    x = torch.randn(50, dtype=torch.bfloat16)
    testing.assert_close(x, x.float())
    with pytest.raises(AssertionError, match="context"):
        testing.assert_close(x.float(), x.float() + 1, err_msg="context")


# ---------------------------------------------------------------- perf_report

def make_mark(**bench_kwargs):
    @testing.perf_report(testing.Benchmark(
        x_names=["size"], x_vals=[128, 256, 512], line_arg="provider", line_vals=["a", "b"],
        line_names=["A", "B"], plot_name="demo-bench", args={"scale": 2.0}, ylabel="GB/s", **bench_kwargs))
    def bench(size, provider, scale):
        v = size * scale if provider == "a" else size / scale
        return v, v * 0.9, v * 1.1

    return bench


def test_perf_report_prints_a_table(capsys):
    make_mark().run(print_data=True)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "demo-bench:"
    # Triton 3.6's labels: the line name and the y label
    assert out[1].split() == ["size", "A", "(GB/s)", "B", "(GB/s)"]
    assert out[2].split() == ["0", "128", "256", "64"]
    assert out[4].split() == ["2", "512", "1024", "256"]


def test_perf_report_saves_csv_html_and_png_when_matplotlib_is_there(tmp_path):
    table = make_mark().run(save_path=str(tmp_path), return_df=True)
    rows = list(csv.reader(open(tmp_path / "demo-bench.csv")))
    assert rows[0] == ["size", "A (GB/s)", "B (GB/s)"] and float(rows[2][1]) == 512.0
    assert "demo-bench.png" in (tmp_path / "results.html").read_text()
    has_mpl = importlib.util.find_spec("matplotlib") is not None
    assert (tmp_path / "demo-bench.png").exists() == has_mpl
    if importlib.util.find_spec("pandas") is None:
        assert table["B (GB/s)"] == [64.0, 128.0, 256.0]
    else:
        assert list(table["B (GB/s)"]) == [64.0, 128.0, 256.0]


def test_perf_report_multi_name_x_values_and_diff_column(capsys):
    @testing.perf_report([testing.Benchmark(
        x_names=["M", "N"], x_vals=[(2, 3), 4], line_arg="p", line_vals=[1, 10], line_names=["one", "ten"],
        plot_name="", args={})])
    def bench(M, N, p):
        return float(M * N * p)

    bench.run(print_data=True, diff_col=True)
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["M", "N", "one", "()", "ten", "()", "Diff"]
    assert out[2].split() == ["0", "2", "3", "6", "60", "54"]
    assert out[3].split() == ["1", "4", "4", "16", "160", "144"]

    @testing.perf_report(testing.Benchmark(x_names=["M", "N"], x_vals=[(1, 2, 3)], line_arg="p",
                                           line_vals=[1], line_names=["one"], plot_name="", args={}))
    def bad(M, N, p):
        return 0.0

    with pytest.raises(ValueError, match="Expected 2 values"):
        bad.run()


# ---------------------------------------------------------------- driver

def test_active_driver_and_module_forwarding():
    assert driver_module.active is driver.active
    expected = "cuda" if HAS_GPU else "cpu"
    assert driver.active.backend == expected
    assert CpuDriver.is_active()


def test_cpu_driver_answers_what_tutorials_ask():
    cpu = driver.for_backend("cpu")
    props = cpu.utils.get_device_properties(cpu.get_current_device())
    for k in ("multiprocessor_count", "max_shared_mem", "max_num_regs", "warpSize"):
        assert isinstance(props[k], int) and props[k] > 0
    target = cpu.get_current_target()
    assert target.backend == "cpu" and target.warp_size == 1
    assert cpu.get_current_stream() == 0
    assert cpu.get_device_interface() is HostDeviceInterface
    with pytest.raises(ValueError):
        cpu.set_current_device(1)
    torch = pytest.importorskip("torch")
    assert cpu.get_active_torch_device() == torch.device("cpu")


def test_set_active_and_reset():
    cpu = driver.for_backend("cpu")
    driver.set_active(cpu)
    try:
        assert driver.active is cpu and driver_module.active is cpu
    finally:
        driver.reset_active()
    assert driver.active is driver.default


def test_host_events_measure_milliseconds():
    start, end = HostDeviceInterface.Event(enable_timing=True), HostDeviceInterface.Event(enable_timing=True)
    start.record()
    time.sleep(0.003)
    end.record()
    assert 2.5 < start.elapsed_time(end) < 100


@requires_gpu
def test_cuda_driver_properties_and_target():
    cuda = driver.for_backend("cuda")
    props = cuda.utils.get_device_properties(0)
    assert props["multiprocessor_count"] > 0 and props["warpSize"] == 32
    assert props["max_shared_mem"] >= 48 * 1024 and props["max_num_regs"] >= 32768
    target = cuda.get_current_target()
    assert target.backend == "cuda" and target.arch >= 70 and target.warp_size == 32


@requires_gpu
def test_do_bench_with_cuda_events():
    torch = pytest.importorskip("torch")
    x = torch.randn(1 << 22, device="cuda")
    ms = testing.do_bench(lambda: x * 2, quantiles=(0.5, 0.2, 0.8))
    assert 0 < ms[0] < 100
    assert cuda_stream_is_torch_stream()
    assert 0 < testing.do_bench_cudagraph(lambda: x * 2) < 100


def cuda_stream_is_torch_stream() -> bool:
    import torch

    return driver.for_backend("cuda").get_current_stream() == torch.cuda.current_stream().cuda_stream


@requires_gpu
def test_cuda_bindings_device_interface_without_torch():
    from tegula.backends.cuda.driver import DeviceInterface

    start, end = DeviceInterface.Event(), DeviceInterface.Event()
    start.record()
    end.record()
    DeviceInterface.synchronize()
    assert start.elapsed_time(end) >= 0
