"""The pass manager: pipelines, timings, dumps, verification and error wrapping."""
from __future__ import annotations

import pytest
from passes_test_utils import canon, parse

from tegula.errors import CompilationError
from tegula.ir.core import Instr, Value
from tegula.ir.ops import Op
from tegula.ir.printer import print_ir
from tegula.passes import (
    PASSES,
    PIPELINES,
    PassContext,
    PassError,
    register_pass,
    run_pipeline,
)
from tegula.passes.pipelines import register_pipeline

KERNEL = """
    kernel @k(%x: i32, %n: i32, %out: ptr<i32>) {
      %lb = constant {value = 0} : i32
      %st = constant {value = 1} : i32
      %r = for %lb, %n, %st, %x : i32, i32, i32, i32 -> i32 {
      ^(%i: i32, %acc: i32):
        %z = constant {value = 0} : i32
        %two = constant {value = 2} : i32
        %three = constant {value = 3} : i32
        %six = mul %two, %three : i32
        %inv = mul %x, %six : i32
        %inv2 = mul %six, %x : i32
        %a = add %acc, %inv : i32
        %b = add %a, %inv2 : i32
        %c = add %b, %z : i32
        yield %c
      }
      store %out, %r {}
      return
    }"""


def test_tir_opt_pipeline_end_to_end():
    ctx = PassContext(verify=True)
    k = run_pipeline(parse(KERNEL), "tir_opt", ctx)
    assert print_ir(k) == canon("""
        kernel @k(%x: i32, %n: i32, %out: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %six = constant {value = 6} : i32
          %inv = mul %x, %six : i32
          %r = for %lb, %n, %st, %x : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %acc: i32):
            %a = add %acc, %inv : i32
            %b = add %a, %inv : i32
            yield %b
          }
          store %out, %r {}
          return
        }""")
    assert set(ctx.timings) == set(PIPELINES["tir_opt"])
    assert all(t >= 0 for t in ctx.timings.values())


def test_dump_hook_sees_before_and_after_of_selected_passes():
    seen = []
    ctx = PassContext(dump=lambda name, when, text: seen.append((name, when, text)),
                      dump_passes={"cse"})
    run_pipeline(parse(KERNEL), ["canonicalize", "cse", "dce"], ctx)
    assert [(n, w) for n, w, _ in seen] == [("cse", "before"), ("cse", "after")]
    assert seen[0][2].startswith("kernel @k(") and seen[0][2] != seen[1][2]
    everything = []
    run_pipeline(parse(KERNEL), "tir_opt", PassContext(dump=lambda *a: everything.append(a[:2])))
    assert len(everything) == 2 * len(PIPELINES["tir_opt"])


def test_exceptions_are_wrapped_with_the_pass_name():
    def broken(kernel, ctx):
        raise ValueError("bad things")

    with pytest.raises(PassError, match="during pass broken: ValueError: bad things") as info:
        run_pipeline(parse(KERNEL), ["canonicalize", broken])
    assert info.value.pass_name == "broken"
    assert isinstance(info.value.__cause__, ValueError)


def test_compilation_errors_pass_through_untouched():
    err = CompilationError("user mistake")

    def complains(kernel, ctx):
        raise err

    with pytest.raises(CompilationError) as info:
        run_pipeline(parse(KERNEL), [complains])
    assert info.value is err


def test_verification_blames_the_pass_that_broke_the_ir():
    def breaks_ssa(kernel, ctx):
        ghost = Value(kernel.args[0].type)
        store = kernel.body.instrs[-2]
        kernel.body.instrs.insert(-2, Instr(Op.ADD, [ghost, ghost], [Value(ghost.type)]))
        assert store.op is Op.STORE
        return kernel

    with pytest.raises(PassError, match="during pass breaks_ssa: IR verification failed"):
        run_pipeline(parse(KERNEL), ["cse", breaks_ssa, "dce"], PassContext(verify=True))
    # without verification the broken IR goes through unnoticed
    broken = run_pipeline(parse(KERNEL), [breaks_ssa], PassContext(verify=False))
    with pytest.raises(PassError, match="during pass cse: its input IR is malformed"):
        run_pipeline(broken, ["cse"], PassContext(verify=True))


def test_verify_defaults_to_the_knob(monkeypatch):
    monkeypatch.setenv("TEGULA_VERIFY_IR", "1")
    assert PassContext().verify is True
    monkeypatch.setenv("TEGULA_VERIFY_IR", "0")
    assert PassContext().verify is False


def test_registry_and_unknown_names():
    assert {"canonicalize", "cse", "dce", "licm"} <= set(PASSES)
    with pytest.raises(KeyError, match="unknown pipeline or pass"):
        run_pipeline(parse(KERNEL), "no_such_pipeline")
    with pytest.raises(KeyError, match="unknown pass"):
        run_pipeline(parse(KERNEL), ["cse", "nope"])
    with pytest.raises(KeyError):
        register_pipeline("bad", ["cse", "nope"])


def test_registering_a_pass_and_pipeline():
    calls = []

    @register_pass("test_counting_pass")
    def counting(kernel, ctx):
        calls.append(ctx.options)
        return kernel

    try:
        register_pipeline("test_pipeline", ["test_counting_pass", "dce", "test_counting_pass"])
        ctx = PassContext(options="opts")
        run_pipeline(parse(KERNEL), "test_pipeline", ctx)
        assert calls == ["opts", "opts"] and "test_counting_pass" in ctx.timings
        run_pipeline(parse(KERNEL), "cse")  # a single pass by name
    finally:
        PASSES.pop("test_counting_pass", None)
        PIPELINES.pop("test_pipeline", None)


def test_a_pass_must_return_a_kernel():
    with pytest.raises(PassError, match="returned NoneType"):
        run_pipeline(parse(KERNEL), [lambda k, ctx: None])
