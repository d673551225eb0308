"""@heuristics against a recording fake kernel (the real-kernel versions, and both
stacking orders with @autotune on real kernels, are in test_autotune_e2e.py)."""
from __future__ import annotations

import pytest

from tegula.runtime.heuristics import Heuristics, heuristics
from tegula.runtime.kernel_interface import KernelInterface


class Recorder(KernelInterface):
    _tegula_jit = True

    def __init__(self):
        def kernel(x, n):
            pass

        self.fn = kernel
        self.__name__ = "kernel"
        self.arg_names = ["x", "n"]
        self.calls = []

    def run(self, *args, grid, warmup, **kwargs):
        self.calls.append(("warmup" if warmup else "run", args, grid, kwargs))
        return "compiled"


def test_values_are_computed_from_positional_and_keyword_arguments():
    rec = Recorder()
    kernel = heuristics({"BLOCK": lambda a: 2 * a["n"], "EVEN": lambda a: a["n"] % 2 == 0})(rec)
    assert isinstance(kernel, Heuristics) and kernel.arg_names == ["x", "n"] and kernel.fn is rec
    kernel[(3,)]("X", 8)
    kernel[(3,)]("X", n=5)
    (_, args, grid, kw), (_, _, _, kw2) = rec.calls
    assert args == ("X", 8) and grid == (3,)
    assert kw == {"BLOCK": 16, "EVEN": True} and kw2 == {"n": 5, "BLOCK": 10, "EVEN": False}


def test_later_heuristics_see_earlier_ones_and_launch_keywords():
    rec = Recorder()
    seen = {}

    def second(a):
        seen.update(a)
        return a["BLOCK"] + 1

    kernel = heuristics({"BLOCK": lambda a: 4, "PLUS": second})(rec)
    kernel[(1,)]("X", 2, num_warps=2)
    assert seen["BLOCK"] == 4 and seen["num_warps"] == 2 and seen["grid"] == (1,) and seen["warmup"] is False
    assert rec.calls[0][3]["PLUS"] == 5


def test_heuristic_overrides_a_value_passed_by_the_caller_as_in_triton():
    rec = Recorder()
    kernel = heuristics({"BLOCK": lambda a: 64})(rec)
    kernel[(1,)]("X", 2, BLOCK=8)
    assert rec.calls[0][3]["BLOCK"] == 64


def test_warmup_applies_heuristics_and_compiles():
    rec = Recorder()
    kernel = heuristics({"BLOCK": lambda a: 32})(rec)
    assert kernel.warmup("X", 7, grid=(1,)) == "compiled"
    assert rec.calls == [("warmup", ("X", 7), (1,), {"BLOCK": 32})]


def test_missing_argument_names_the_heuristic():
    kernel = heuristics({"BLOCK": lambda a: a["N"]})(Recorder())
    with pytest.raises(KeyError, match=r"heuristic for 'BLOCK' of kernel 'kernel' looked up 'N'"):
        kernel[(1,)]("X", 3)


def test_stacked_heuristics():
    rec = Recorder()
    kernel = heuristics({"A": lambda a: 1})(heuristics({"B": lambda a: a["A"] + 1})(rec))
    kernel[(1,)]("X", 3)
    assert rec.calls[0][3] == {"A": 1, "B": 2}
    assert kernel.__name__ == "kernel"
