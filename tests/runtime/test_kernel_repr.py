"""`@jit(repr=fn)` names the compiled kernel, as in Triton 3.6: `fn` receives the
specialization (`.signature`: parameter -> type string, `.constants`: the parameters
bound at compile time, ints equal to 1 included) and returns the name, which becomes
`CompiledKernel.name`, the IR kernel's name and the PTX entry's."""
from __future__ import annotations

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.errors import KernelArgumentError
from tegula.runtime.source import ASTSource

SEEN: list = []


def _name(spec) -> str:
    SEEN.append(spec)
    ones = "_".join(k for k, v in spec.constants.items() if v == 1)
    return f"kernel_{spec.signature['value']}_{ones}"


@triton.jit(repr=_name)
def _named(value, is_one, x, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), value)


@pytest.mark.parametrize("interpret", [True, False], ids=["interpreter", "cpu"])
@pytest.mark.parametrize("value, ty", [(-1, "i32"), (2**31, "i64"), (2**63, "u64")])
def test_repr_names_the_compiled_kernel(monkeypatch, interpret, value, ty):
    if interpret:
        monkeypatch.setenv("TEGULA_INTERPRET", "1")
    else:
        monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    SEEN.clear()
    h = _named[(1,)](value, 1, np.zeros(4, np.float32), BLOCK=4)
    assert h.name == f"kernel_{ty}_is_one"
    assert h.metadata.name == h.name
    assert f"kernel @kernel_{ty}_is_one(" in h.asm["tir"]
    spec = SEEN[-1]
    assert spec.signature == {"value": ty, "is_one": "constexpr", "x": "*fp32", "BLOCK": "constexpr"}
    assert spec.constants == {"is_one": 1, "BLOCK": 4}


def test_repr_names_the_ptx_entry():
    src = ASTSource(_named, {"value": "i64", "is_one": "constexpr", "x": "*fp32"}, {"is_one": 1, "BLOCK": 4})
    assert src.name == "kernel_i64_is_one"
    h = triton.compile(src, target=GPUTarget("cuda", 90, 32))
    assert h.name == "kernel_i64_is_one"
    assert ".entry kernel_i64_is_one(" in h.asm["ptx"]


def test_without_repr_the_kernel_keeps_the_function_name():
    @triton.jit
    def plain(x):
        pass

    h = plain[(1,)](np.zeros(1, np.float32))
    assert h.name == "plain"


def test_a_name_that_cannot_name_a_function_is_refused():
    @triton.jit(repr=lambda spec: "not a name")
    def bad(x):
        pass

    with pytest.raises(KernelArgumentError, match="repr= of kernel 'bad' returned 'not a name'"):
        bad[(1,)](np.zeros(1, np.float32))


def test_the_name_is_part_of_the_cache_key():
    names = iter(["first", "second"])

    def once(spec):
        return next(names)

    @triton.jit(repr=once)
    def k(x):
        pass

    a = ASTSource(k, {"x": "*fp32"})
    b = ASTSource(k, {"x": "*fp32"})
    assert (a.name, b.name) == ("first", "second") and a.fn_key() != b.fn_key()
