"""`tegula.testing`: timing and checking kernels, as `triton.testing` does.

- `do_bench` times a callable the way Triton does on the GPU (CUDA events, a 256 MB
  buffer zeroed before every repetition so each run starts with a cold L2) and with the
  host's monotonic clock on the CPU, where the work is synchronous.
- `do_bench_cudagraph` replays the callable from a CUDA graph to take launch overhead out.
- `assert_close` compares arrays or tensors of any library (numpy, torch, CuPy).
- `Benchmark` / `perf_report` sweep a function over arguments, print a table, write CSV,
  and plot with matplotlib when it is installed. pandas is optional: the table is ours.
"""
from __future__ import annotations

import importlib.util
import math
import os
import statistics
from typing import Any, Callable, Optional, Sequence, Union

_RETURN_MODES = ("min", "max", "mean", "median", "all")


def _driver_for(device: Any):
    from tegula.runtime.driver import driver

    if device is None:
        return driver.active
    backend = getattr(device, "type", device)  # accepts "cuda", "cpu" or a torch.device
    return driver.for_backend("cuda" if str(backend).startswith("cuda") else "cpu")


def _quantiles(times: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Linear-interpolation quantiles (torch.quantile's default), without torch."""
    xs = sorted(times)
    out = []
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        pos = q * (len(xs) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(xs) - 1)
        out.append(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))
    return out


def _summarize(times: list[float], quantiles: Optional[Sequence[float]], return_mode: str) -> Any:
    if quantiles is not None:
        ret = _quantiles(times, quantiles)
        return ret[0] if len(ret) == 1 else ret
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.mean, "median": statistics.median}[return_mode](times)


def _clear_grads(grad_to_none: Optional[Sequence[Any]]) -> None:
    if grad_to_none is not None:
        for x in grad_to_none:
            x.grad = None


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100,
             grad_to_none: Optional[Sequence[Any]] = None, quantiles: Optional[Sequence[float]] = None,
             return_mode: str = "mean", *, device: Any = None) -> Any:
    """Run time of `fn` in milliseconds.

    `warmup` and `rep` are time budgets in ms; the number of runs follows from a first
    estimate. Returns the `quantiles` of the run times when given, else their
    `return_mode` ("min", "max", "mean", "median", or "all" for the list).
    `device` ("cuda", "cpu"; a tegula extension) picks the clock; by default the active
    driver's: CUDA events on a GPU machine, the host clock elsewhere.
    """
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode must be one of {_RETURN_MODES}, not {return_mode!r}")
    drv = _driver_for(device)
    on_host = drv.backend == "cpu"
    di = drv.get_device_interface()

    fn()  # compiles, allocates, and brings code into caches: not part of any estimate
    di.synchronize()
    cache = drv.get_empty_cache_for_benchmark()

    # On the GPU, five runs amortize the event overhead (Triton's choice); on the host the
    # clock is exact and an interpreted run can take long, so one run is estimate enough.
    n_est = 1 if on_host else 5
    start, end = di.Event(enable_timing=True), di.Event(enable_timing=True)
    start.record()
    for _ in range(n_est):
        drv.clear_cache(cache)
        fn()
    end.record()
    di.synchronize()
    estimate_ms = max(start.elapsed_time(end) / n_est, 1e-6)

    # The host has already been warmed by the runs above; the GPU needs at least one more.
    n_warmup = int(warmup / estimate_ms) if on_host else max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    starts = [di.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [di.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        _clear_grads(grad_to_none)  # a backward pass must not accumulate into old grads
        drv.clear_cache(cache)
        starts[i].record()
        fn()
        ends[i].record()
    di.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return _summarize(times, quantiles, return_mode)


def do_bench_cudagraph(fn: Callable[[], Any], rep: float = 20, grad_to_none: Optional[Sequence[Any]] = None,
                       quantiles: Optional[Sequence[float]] = None, return_mode: str = "mean") -> Any:
    """Like `do_bench`, but replays `fn` from a CUDA graph (no launch overhead).

    Needs torch with CUDA. On a machine without a GPU it falls back to `do_bench` on the
    host clock, so scripts written for the GPU still run on the CPU."""
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode must be one of {_RETURN_MODES}, not {return_mode!r}")
    if _driver_for(None).backend != "cuda":
        return do_bench(fn, warmup=0, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                        return_mode=return_mode, device="cpu")
    try:
        import torch
    except ImportError:
        raise RuntimeError("do_bench_cudagraph needs torch with CUDA to capture graphs") from None
    with torch.cuda.stream(torch.cuda.Stream()):  # capture is not allowed on the default stream
        fn()
        if grad_to_none is not None:
            for x in grad_to_none:
                x.detach_()
                x.requires_grad_(True)
                x.grad = None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate_ms = start.elapsed_time(end) / 5
        n_repeat = 1000 if estimate_ms == 0 else max(1, int(rep / estimate_ms))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_repeat):
                _clear_grads(grad_to_none)
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n_repeat)
    return _summarize(times, quantiles, return_mode)


def _to_numpy(x: Any) -> Any:
    import numpy as np

    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch
        import torch

        if x.dtype == torch.bfloat16:
            x = x.float()  # numpy has no bfloat16
        return x.detach().cpu().numpy()
    if hasattr(x, "get") and hasattr(x, "__cuda_array_interface__"):  # CuPy
        return x.get()
    return np.asarray(x)


def assert_close(x: Any, y: Any, atol: Union[float, Callable[[Any], float], None] = None,
                 rtol: Union[float, Callable[[Any], float], None] = None, err_msg: str = "") -> None:
    """Assert |x - y| <= atol + rtol * |y| elementwise (NaNs equal), Triton's defaults:
    atol 1e-2, rtol 0. `atol`/`rtol` may be callables of x's dtype."""
    import numpy as np

    dtype = getattr(x, "dtype", None)
    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    atol = atol(dtype) if callable(atol) else atol
    rtol = rtol(dtype) if callable(rtol) else rtol
    xa, ya = _to_numpy(x), _to_numpy(y)
    if xa.size > 1 or ya.size > 1:
        np.testing.assert_allclose(xa, ya, atol=atol, rtol=rtol, equal_nan=True, err_msg=err_msg)
        return
    if not np.allclose(xa, ya, atol=atol, rtol=rtol, equal_nan=True):
        raise AssertionError(f"{err_msg} {xa} is not close to {ya} (atol={atol}, rtol={rtol})".strip())


# ---------------------------------------------------------------------------- perf_report

class Benchmark:
    """One sweep for `perf_report`: `x_names` take each of `x_vals` (a scalar for all
    names, or a tuple with one value per name), `line_arg` takes each of `line_vals`
    (one plotted line each, labelled by `line_names`), and `args` stay fixed."""

    def __init__(self, x_names: list[str], x_vals: list[Any], line_arg: str, line_vals: list[Any],
                 line_names: list[str], plot_name: str, args: dict[str, Any], xlabel: str = "",
                 ylabel: str = "", x_log: bool = False, y_log: bool = False, color: Any = None,
                 styles: Optional[list[tuple[str, str]]] = None) -> None:
        self.x_names = x_names
        self.x_vals = x_vals
        self.x_log = x_log
        self.line_arg = line_arg
        self.line_vals = line_vals
        self.line_names = line_names
        self.y_log = y_log
        self.styles = styles
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.plot_name = plot_name
        self.args = args


class Table:
    """The results of one benchmark: named columns of equal length (a pandas stand-in)."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = list(columns)
        self.rows: list[list[Any]] = []

    def append(self, row: list[Any]) -> None:
        self.rows.append(list(row))

    def __getitem__(self, column: str) -> list[Any]:
        i = self.columns.index(column)
        return [r[i] for r in self.rows]

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, columns: list[str]) -> "Table":
        out = Table(columns)
        idx = [self.columns.index(c) for c in columns]
        for r in self.rows:
            out.append([r[i] for i in idx])
        return out

    @staticmethod
    def _fmt(v: Any) -> str:
        if v is None:
            return "NaN"
        if isinstance(v, float):
            return f"{v:.6f}".rstrip("0").rstrip(".") if math.isfinite(v) else str(v)
        return str(v)

    def to_string(self) -> str:
        cells = [[""] + self.columns]
        cells += [[str(i)] + [self._fmt(v) for v in r] for i, r in enumerate(self.rows)]
        widths = [max(len(row[c]) for row in cells) for c in range(len(cells[0]))]
        return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in cells)

    def to_csv(self, path: str, precision: int = 6) -> None:
        def fmt(v: Any) -> str:
            return f"{v:.{precision}f}" if isinstance(v, float) else ("" if v is None else str(v))

        with open(path, "w") as f:
            f.write(",".join(self.columns) + "\n")
            for r in self.rows:
                f.write(",".join(fmt(v) for v in r) + "\n")

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)

    __str__ = to_string


def _line_labels(bench: Benchmark) -> tuple[list[str], list[str]]:
    """Column labels as Triton 3.6 names them: `Name (ylabel)` for the means, then
    `Name-min (ylabel)` and `Name-max (ylabel)` (code reading the table by label works
    unchanged)."""
    means = [f"{n} ({bench.ylabel})" for n in bench.line_names]
    lows = [f"{n}-min ({bench.ylabel})" for n in bench.line_names]
    highs = [f"{n}-max ({bench.ylabel})" for n in bench.line_names]
    return means, lows + highs


def _plot(bench: Benchmark, table: Table, show_plots: bool, save_path: str) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        return  # plotting is optional; the table and CSV are always produced
    if show_plots:
        import matplotlib.pyplot as plt

        fig = plt.figure()
    else:
        # A bare Figure needs no GUI backend, so saving works on headless machines.
        from matplotlib.figure import Figure

        fig = Figure()
    ax = fig.add_subplot()
    first_x = bench.x_names[0]
    xs = table[first_x]
    means_l, extra = _line_labels(bench)
    n = len(bench.line_names)
    for i, name in enumerate(bench.line_names):
        color = bench.styles[i][0] if bench.styles else None
        style = bench.styles[i][1] if bench.styles else None
        ax.plot(xs, table[means_l[i]], label=name, color=color, ls=style)
        lo, hi = table[extra[i]], table[extra[n + i]]
        if all(v is not None for v in lo + hi):
            ax.fill_between(xs, lo, hi, alpha=0.15, color=color)
    ax.legend()
    ax.set_xlabel(bench.xlabel or first_x)
    ax.set_ylabel(bench.ylabel)
    ax.set_xscale("log" if bench.x_log else "linear")
    ax.set_yscale("log" if bench.y_log else "linear")
    if save_path:
        fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show_plots:
        import matplotlib.pyplot as plt

        plt.show()


class Mark:
    """A function marked by `perf_report`; `.run(...)` performs its benchmarks."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Union[Benchmark, list[Benchmark]]) -> None:
        self.fn = fn
        self.benchmarks = benchmarks

    def _run(self, bench: Benchmark, save_path: str, show_plots: bool, print_data: bool,
             diff_col: bool = False, save_precision: int = 6, **kwargs: Any) -> Table:
        x_names = list(bench.x_names)
        means_l, extra = _line_labels(bench)
        table = Table(x_names + means_l + extra)
        for x in bench.x_vals:
            xs = list(x) if isinstance(x, (list, tuple)) else [x] * len(x_names)
            if len(xs) != len(x_names):
                raise ValueError(f"Expected {len(x_names)} values, got {x}")
            x_args = dict(zip(x_names, xs))
            means, mins, maxs = [], [], []
            for y in bench.line_vals:
                ret = self.fn(**x_args, **{bench.line_arg: y}, **bench.args, **kwargs)
                if isinstance(ret, (list, tuple)) and len(ret) == 3:
                    m, lo, hi = ret
                else:
                    m, lo, hi = ret, None, None
                means.append(m)
                mins.append(lo)
                maxs.append(hi)
            table.append(xs + means + mins + maxs)
        if bench.plot_name:
            _plot(bench, table, show_plots, save_path)
        shown = table.select(x_names + means_l)
        if diff_col and len(bench.line_names) == 2:
            a, b = means_l
            shown.columns.append("Diff")
            for r, va, vb in zip(shown.rows, shown[a], shown[b]):
                r.append(vb - va)
        if print_data:
            print(bench.plot_name + ":")
            print(shown.to_string())
        if save_path:
            shown.to_csv(os.path.join(save_path, f"{bench.plot_name}.csv"), precision=save_precision)
        return shown

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "",
            return_df: bool = False, **kwargs: Any) -> Any:
        """Run every benchmark; print tables with `print_data`; write `<plot_name>.png`,
        `.csv` and `results.html` under `save_path`. With `return_df`, return the
        table(s): pandas DataFrames when pandas is installed, else `Table` objects."""
        single = isinstance(self.benchmarks, Benchmark)
        benchmarks = [self.benchmarks] if single else list(self.benchmarks)
        tables = []
        if save_path:
            os.makedirs(save_path, exist_ok=True)
        for bench in benchmarks:
            tables.append(self._run(bench, save_path, show_plots, print_data, **kwargs))
        if save_path:
            with open(os.path.join(save_path, "results.html"), "w") as html:
                html.write("<html><body>\n")
                for bench in benchmarks:
                    html.write(f'<image src="{bench.plot_name}.png"/>\n')
                html.write("</body></html>\n")
        if not return_df:
            return None
        try:
            out = [t.to_pandas() for t in tables]
        except ImportError:
            out = tables
        return out[0] if single else out


def perf_report(benchmarks: Union[Benchmark, list[Benchmark]]) -> Callable[[Callable[..., Any]], Mark]:
    """Decorator: mark a function for benchmarking; run it with `.run(...)`."""

    def wrapper(fn: Callable[..., Any]) -> Mark:
        return Mark(fn, benchmarks)

    return wrapper
