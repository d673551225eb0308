"""`tegula.profiler` (proton's API): sessions record timed scopes and kernel launches
into a tree written as `<name>.hatchet`; the viewer derives rates from it; the runtime's
launch hook is present only while a session exists."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
import tegula.profiler as proton
from tegula.profiler import viewer
from tegula.runtime import launch_hooks


def _meta(grid, kernel, args):
    return {"name": f"{kernel.name} [n={args['n']}]", "flops32": 2.0 * args["n"], "bytes": 8 * args["n"]}


@triton.jit(launch_metadata=_meta)
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@pytest.fixture(autouse=True)
def _no_leftover_session():
    yield
    proton.finalize()  # a failing test must not leave the hook installed
    assert launch_hooks.current() is None


def _load(path) -> dict:
    with open(path) as f:
        return json.load(f)[0]


def _child(node: dict, name: str) -> dict:
    (found,) = [c for c in node["children"] if c["frame"]["name"] == name]
    return found


def test_scopes_and_launches_are_recorded_with_times(tmp_path):
    n = int(np.random.randint(100, 3000))
    x = np.random.randint(0, 1000, n).astype(np.float32)  # exact sums
    expected = x + 6
    add_one[(triton.cdiv(n, 64),)](x, n, BLOCK=64)  # compiled before profiling
    sid = proton.start(str(tmp_path / "run"), hook="triton")
    assert launch_hooks.current() is not None
    with proton.scope("outer", {"bytes": 10}):
        for _ in range(3):
            add_one[(triton.cdiv(n, 64),)](x, n, BLOCK=64)
        with proton.scope("sleep"):
            time.sleep(0.05)
    proton.deactivate(sid)
    add_one[(triton.cdiv(n, 64),)](x, n, BLOCK=64)  # not recorded
    proton.activate(sid)
    proton.enter_scope("manual")
    add_one[(triton.cdiv(n, 64),)](x, n, BLOCK=64)
    proton.exit_scope()
    proton.finalize()
    assert launch_hooks.current() is None
    np.testing.assert_array_equal(x, expected)  # profiling never changes results

    root = _load(tmp_path / "run.hatchet")
    assert [c["frame"]["name"] for c in root["children"]] == ["outer", "manual"]
    outer = _child(root, "outer")
    kern = _child(outer, f"add_one [n={n}]")
    assert kern["frame"]["type"] == "kernel"
    assert kern["metrics"]["count"] == 3
    assert kern["metrics"]["flops32"] == 3 * 2.0 * n and kern["metrics"]["bytes"] == 3 * 8 * n
    assert kern["metrics"]["time (ns)"] > 0
    sleep = _child(outer, "sleep")["metrics"]["time (ns)"]
    assert 0.05e9 <= sleep < 5e9  # measured, not invented
    assert outer["metrics"]["time (ns)"] >= sleep + kern["metrics"]["time (ns)"]
    assert outer["metrics"]["bytes"] == 10
    assert _child(_child(root, "manual"), f"add_one [n={n}]")["metrics"]["count"] == 1
    assert root["metrics"]["time (ns)"] == pytest.approx(
        outer["metrics"]["time (ns)"] + _child(root, "manual")["metrics"]["time (ns)"])


def test_without_triton_hook_kernels_keep_their_name(tmp_path):
    x = np.zeros(64, np.float32)
    proton.start(str(tmp_path / "plain"))

    @proton.scope("decorated")
    def step():
        add_one[(1,)](x, 64, BLOCK=64)

    step()
    step()
    proton.finalize()
    decorated = _child(_load(tmp_path / "plain.hatchet"), "decorated")
    assert decorated["metrics"]["count"] == 2
    assert _child(decorated, "add_one")["metrics"] == {"count": 2, "time (ns)": pytest.approx(
        _child(decorated, "add_one")["metrics"]["time (ns)"])}


def test_viewer_derives_rates_and_prints_the_tree(tmp_path, capsys):
    x = np.zeros(256, np.float32)
    proton.start(str(tmp_path / "v"), hook="triton")
    with proton.scope("s", {"flops16": 4e9}):
        time.sleep(0.01)
        add_one[(4,)](x, 256, BLOCK=64)
    proton.finalize()
    tree, metrics = viewer.parse(["tflop/s", "time/ms", "count"], str(tmp_path / "v.hatchet"))
    s = _child(tree, "s")
    t_ms = s["values"][1]
    assert t_ms >= 10
    # flops of the scope and of its kernel, over the scope's time
    assert s["values"][0] == pytest.approx((4e9 + 2.0 * 256) / (t_ms / 1e3) / 1e12)
    viewer.print_tree(tree, metrics)
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("└─ ") and out.splitlines()[1].endswith(" s")
    assert out.splitlines()[2].endswith(" add_one [n=256]")
    viewer.main(["-m", "count", str(tmp_path / "v.hatchet")])  # proton-viewer's command line
    assert capsys.readouterr().out.splitlines()[:3] == ["0.000 ROOT", "└─ 1.000 s", "   └─ 1.000 add_one [n=256]"]
    with pytest.raises(ValueError, match="metric 'joules' is not in"):
        viewer.parse(["joules"], str(tmp_path / "v.hatchet"))


def test_python_context_records_the_call_stack(tmp_path):
    x = np.zeros(64, np.float32)

    def helper():
        add_one[(1,)](x, 64, BLOCK=64)

    proton.start(str(tmp_path / "py"), context="python")
    helper()
    proton.finalize()
    node = _load(tmp_path / "py.hatchet")
    names = []
    while node["children"]:
        node = node["children"][0]
        names.append(node["frame"]["name"])
    assert names[-1] == "add_one" and names[-2].startswith(f"helper@{__file__}:")


def test_unsupported_options_are_refused():
    with pytest.raises(ValueError, match="output format 'chrome_trace' is not supported"):
        proton.finalize(output_format="chrome_trace")
    with pytest.raises(ValueError, match="context 'cpu' is not supported"):
        proton.start("x", context="cpu")


def test_launch_functions_carry_the_hook_only_while_profiling(tmp_path):
    x = np.zeros(64, np.float32)
    add_one[(1,)](x, 64, BLOCK=64)
    assert "_tg_lenter" not in add_one._runner.__tegula_source__
    proton.start(str(tmp_path / "h"))
    add_one[(1,)](x, 64, BLOCK=64)
    assert "_tg_lenter" in add_one._runner.__tegula_source__
    proton.finalize()
    add_one[(1,)](x, 64, BLOCK=64)
    assert "_tg_lenter" not in add_one._runner.__tegula_source__


class _FakeCudaEvent:
    """Stands in for torch.cuda.Event: records the host clock, reports milliseconds."""

    synchronized = 0

    def __init__(self, enable_timing: bool = True):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        _FakeCudaEvent.synchronized += 1

    def elapsed_time(self, end) -> float:
        return (end.t - self.t) * 1e3


def test_device_event_times_are_read_when_the_session_pauses(tmp_path, monkeypatch):
    import importlib

    scope_module = importlib.import_module("tegula.profiler.scope")  # the module, not the class

    monkeypatch.setattr(scope_module, "gpu_event_class", lambda: _FakeCudaEvent)
    sid = proton.start(str(tmp_path / "gpu"))
    with proton.scope("on_device"):
        time.sleep(0.02)
    from tegula.profiler.profile import sessions
    (session,) = [s for s in sessions() if s.id == sid]
    node = session.root.children[("on_device", "scope")]
    assert "time (ns)" not in node.metrics and node.metrics["count"] == 1  # pending: not read per launch
    synced = _FakeCudaEvent.synchronized
    proton.deactivate(sid)
    assert _FakeCudaEvent.synchronized == synced + 1
    assert 0.02e9 <= node.metrics["time (ns)"] < 5e9
    proton.finalize()
    assert _child(_load(tmp_path / "gpu.hatchet"), "on_device")["metrics"]["time (ns)"] == node.metrics["time (ns)"]
