"""@jit / JITFunction: attributes, launching, grids and the errors of a bad launch.

The compiler pipeline is faked (`jit_fakes.fake`): these tests check the runtime only.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tegula
import tegula.language as tl
from tegula.errors import KernelArgumentError, TegulaError
from tegula.runtime.jit import JITFunction, jit


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 128):
    pass


ADD_DEF_LINE = inspect.getsourcelines(add_kernel.fn)[1] + 1


@jit
def scalar_kernel(a, b, c, FLAG: tl.constexpr):
    pass


def _arrays(n: int = 64):
    return np.ones(n, np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)


# ---------------------------------------------------------------------------- the decorator

def test_bare_and_parametrized_jit():
    assert isinstance(add_kernel, JITFunction) and add_kernel._tegula_jit

    @jit(do_not_specialize=["n"], debug=True, noinline=True)
    def k(x, n):
        pass

    assert isinstance(k, JITFunction) and k.debug is True and k.noinline is True
    assert [p.do_not_specialize for p in k.params] == [False, True]
    assert k.__name__ == "k" and k.fn.__name__ == "k"


def test_params_and_names():
    assert add_kernel.arg_names == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]
    assert [p.is_constexpr for p in add_kernel.params] == [False, False, False, False, True]
    assert add_kernel.params[4].default == 128 and add_kernel.params[4].has_default
    assert add_kernel.constexprs == [4]
    assert add_kernel.src.startswith("def add_kernel(")


@pytest.mark.parametrize("annotation", ["tl.constexpr", "triton.language.constexpr", "constexpr",
                                        "tegula.language.constexpr"])
def test_string_annotations_are_constexpr(annotation):
    ns: dict = {}
    exec(f"def k(x, B: '{annotation}'):\n    pass\n", ns)
    assert [p.is_constexpr for p in JITFunction(ns["k"]).params] == [False, True]


def test_future_annotations_module(tmp_path, monkeypatch):
    (tmp_path / "fut_mod.py").write_text(
        "from __future__ import annotations\n"
        "import tegula\nimport tegula.language as tl\n"
        "@tegula.jit\ndef k(x, n: tl.int64, B: tl.constexpr):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fut_mod

    params = fut_mod.k.params
    assert [p.is_constexpr for p in params] == [False, False, True]
    assert params[1].annotation_type == "i64"


def test_do_not_specialize_by_index_and_unknown_name():
    @jit(do_not_specialize=[1], do_not_specialize_on_alignment=["x"])
    def k(x, n):
        pass

    assert k.params[1].do_not_specialize and k.params[0].do_not_specialize_on_alignment
    # Triton ignores a name that is no parameter (FlagGems' kernels carry some): warned
    with pytest.warns(UserWarning, match="do_not_specialize of kernel 'f' names no parameter 'nope'"):
        def f(x):
            pass
        assert jit(do_not_specialize=["nope", 0])(f).params[0].do_not_specialize


def test_calling_from_python_is_an_error():
    with pytest.raises(TegulaError, match=r"cannot be called from Python; launch it with add_kernel\[grid\]"):
        add_kernel(1, 2, 3, 4)


def test_cache_key_depends_on_callees_and_constexpr_globals(tmp_path, monkeypatch):
    (tmp_path / "ck_mod.py").write_text(
        "import tegula\nimport tegula.language as tl\n"
        "SCALE = tl.constexpr(2)\n"
        "@tegula.jit\ndef helper(x):\n    return x * 3\n"
        "@tegula.jit\ndef other_helper(x):\n    return x * 4\n"
        "@tegula.jit\ndef k(x_ptr):\n    tl.store(x_ptr, helper(SCALE))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import ck_mod

    key = ck_mod.k.cache_key
    assert JITFunction(ck_mod.k.fn).cache_key == key          # same source, file and globals
    ck_mod.SCALE = tl.constexpr(5)
    ck_mod.k.clear_cache()
    assert ck_mod.k.cache_key != key                          # a constexpr global changed
    ck_mod.SCALE = tl.constexpr(2)
    ck_mod.k.clear_cache()
    assert ck_mod.k.cache_key == key
    ck_mod.helper = ck_mod.other_helper
    ck_mod.k.clear_cache()
    assert ck_mod.k.cache_key != key                          # a callee's source changed


def test_the_same_source_in_another_file_is_the_same_kernel_except_when_checked(tmp_path, monkeypatch):
    # PyTorch Inductor's compile workers load a kernel from one copy of its module and
    # the parent process from another: the parent must find the workers' binaries (as
    # with Triton, whose keys have no path). Checked accesses report their file, so
    # checked mode keys on it.
    from tegula.backends.compiler import GPUTarget
    from tegula.runtime.compiler import compile as compile_source
    from tegula.runtime.source import ASTSource

    text = "import tegula\nimport tegula.language as tl\n@tegula.jit\ndef k(x_ptr):\n    tl.store(x_ptr, 1.0)\n"
    (tmp_path / "file_a.py").write_text(text)
    (tmp_path / "file_b.py").write_text(text)
    (tmp_path / "file_c.py").write_text("\n" + text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TEGULA_CACHE_DIR", str(tmp_path / "cache"))
    import file_a
    import file_b
    import file_c

    assert file_a.k.cache_key == file_b.k.cache_key
    assert file_a.k.cache_key != file_c.k.cache_key  # the line is in the key

    def key(mod, checked):
        src = ASTSource(mod.k, {"x_ptr": "*fp32"})
        return compile_source(src, target=GPUTarget("cuda", 90, 32), options={"checked": checked}).hash

    assert key(file_a, False) == key(file_b, False)
    assert key(file_a, True) != key(file_b, True)


def test_changed_global_is_reported(fake, tmp_path, monkeypatch):
    (tmp_path / "glob_mod.py").write_text(
        "import tegula\nimport tegula.language as tl\nBLOCK = tl.constexpr(16)\n"
        "@tegula.jit\ndef k(x_ptr):\n    tl.store(x_ptr, BLOCK)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import glob_mod

    x = np.zeros(4, np.float32)
    glob_mod.k[(1,)](x)
    glob_mod.BLOCK = tl.constexpr(32)
    with pytest.raises(TegulaError, match="global 'BLOCK' used by @jit function 'k' changed"):
        glob_mod.k[(1,)](x)


# ---------------------------------------------------------------------------- launching

def test_launch_passes_every_parameter_value(fake):
    x, y, out = _arrays()
    compiled = add_kernel[(2,)](x, y, out, 64, BLOCK=32)
    (kernel, grid, values), = fake.launches
    assert kernel is compiled and grid == (2, 1, 1)
    assert values[:3] == (x, y, out) and values[3:] == (64, 32)


def test_launch_hands_tensor_addresses_to_launchers_that_take_them(fake, monkeypatch):
    """The launch path reads each torch tensor's data_ptr() for the alignment key and
    gives it to a launcher that says `accepts_pointers` (None for other values); a
    launcher that does not say so is called with the values alone."""
    torch = pytest.importorskip("torch")
    seen = []

    def load(compiled, device):
        def launch(grid, values, *pointers):
            seen.append(pointers)
        launch.accepts_pointers = True
        return launch

    monkeypatch.setattr(fake.host, "load", load)
    x, y, out = (torch.ones(64) for _ in range(3))
    add_kernel[(1,)](x, y, out, 64, BLOCK=32)
    assert seen == [(x.data_ptr(), y.data_ptr(), out.data_ptr(), None, None)]
    add_kernel[(1,)](*_arrays(), 64, BLOCK=32)  # numpy arrays: nothing read, nothing handed over
    assert seen[-1] == (None,) * 5


def test_bound_launcher_is_reused_only_for_the_same_grid_and_runner(fake):
    grid_a, grid_b = (2,), (3,)
    first = add_kernel[grid_a]
    assert add_kernel[grid_a] is first and add_kernel[grid_b] is not first
    x, y, out = _arrays()
    first(x, y, out, 64, BLOCK=32)
    add_kernel[grid_b](x, y, out, 64, BLOCK=32)
    assert [g for _k, g, _v in fake.launches] == [(2, 1, 1), (3, 1, 1)]
    before = add_kernel[grid_b]
    add_kernel.add_pre_run_hook(lambda *a, **k: None)  # a new runner: a new bound launcher
    after = add_kernel[grid_b]
    assert after is not before and after.func is add_kernel._runner


def test_default_parameter_value(fake):
    x, y, out = _arrays()
    add_kernel[(1,)](x, y, out, 64)
    assert fake.frontend_calls[-1][2] == {"BLOCK": 128}
    assert fake.launches[-1][2][4] == 128


@pytest.mark.parametrize("grid, expected", [
    ((3,), (3, 1, 1)), ((3, 2), (3, 2, 1)), ((3, 2, 5), (3, 2, 5)), ([4], (4, 1, 1)), ([4, 5], (4, 5, 1)),
])
def test_grid_forms(fake, grid, expected):
    x, y, out = _arrays()
    add_kernel[grid](x, y, out, 64)
    assert fake.launches[-1][1] == expected


def test_callable_grid_sees_bound_arguments_and_meta_parameters(fake):
    x, y, out = _arrays()
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (tegula.cdiv(meta["n"], meta["BLOCK"]),)

    add_kernel[grid](x, y, out, 100, BLOCK=32)
    add_kernel[grid](x, y, out, n=100)
    assert seen[0]["BLOCK"] == 32 and seen[0]["n"] == 100 and seen[0]["x_ptr"] is x
    assert seen[1]["BLOCK"] == 128  # the default is bound too
    assert [launch[1] for launch in fake.launches] == [(4, 1, 1), (1, 1, 1)]


@pytest.mark.parametrize("grid, message", [
    ((1, 2, 3, 4), "1 to 3 dimensions"), ((), "1 to 3 dimensions"), ("ab", "must be a tuple"),
    (None, "needs a grid"), (object(), "must be a tuple"),
])
def test_bad_grids(fake, grid, message):
    x, y, out = _arrays()
    with pytest.raises(KernelArgumentError, match=message):
        add_kernel[grid](x, y, out, 64)


def test_run_and_warmup(fake):
    x, y, out = _arrays()
    compiled = add_kernel.warmup(x, y, out, 64, grid=(1,), BLOCK=64)
    assert compiled.name == "add_kernel" and fake.launches == []
    assert add_kernel.run(x, y, out, 64, grid=(1,), warmup=False, BLOCK=64) is compiled
    assert len(fake.launches) == 1 and len(fake.frontend_calls) == 1


def test_warmup_with_dtypes_instead_of_arrays(fake):
    torch = pytest.importorskip("torch")
    compiled = add_kernel.warmup(torch.float16, np.dtype(np.float32), torch.float16, 64, grid=(1,))
    sig = compiled.metadata.signature
    assert (sig["x_ptr"], sig["y_ptr"], sig["out_ptr"]) == ("*fp16", "*fp32", "*fp16")
    assert fake.frontend_calls[-1][3]["x_ptr"].divisibility == 16
    assert fake.launches == []


def test_pre_run_hook(fake):
    calls = []
    add_kernel.add_pre_run_hook(lambda *args, **kwargs: calls.append((len(args), sorted(kwargs))))
    try:
        x, y, out = _arrays()
        add_kernel[(1,)](x, y, out, 64, num_warps=2)
        assert calls == [(5, ["num_warps"])]
    finally:
        add_kernel.pre_run_hooks.clear()
        add_kernel.clear_cache()


# ---------------------------------------------------------------------------- bad launches

def test_missing_argument_names_parameters_and_definition(fake):
    x, y, out = _arrays()
    with pytest.raises(KernelArgumentError) as info:
        add_kernel[(1,)](x, y, out)
    text = str(info.value)
    assert "missing 'n'" in text
    assert "(x_ptr, y_ptr, out_ptr, n, BLOCK: constexpr = 128)" in text
    assert f"{__file__}:{ADD_DEF_LINE}" in text


def test_too_many_arguments(fake):
    x, y, out = _arrays()
    with pytest.raises(KernelArgumentError, match=r"got 6 positional arguments for 5 parameters") as info:
        add_kernel[(1,)](x, y, out, 64, 32, 7)
    assert f"{__file__}:{ADD_DEF_LINE}" in str(info.value)


def test_unknown_keyword_argument(fake):
    x, y, out = _arrays()
    with pytest.raises(KernelArgumentError, match=r"'num_wraps' \(did you mean 'num_warps'\?\)") as info:
        add_kernel[(1,)](x, y, out, 64, num_wraps=8)
    assert "add_kernel" in str(info.value) and "launch options are" in str(info.value)
    with pytest.raises(KernelArgumentError, match=r"'BLOK' \(did you mean 'BLOCK'\?\)"):
        add_kernel[(1,)](x, y, out, 64, BLOK=8)


def test_bad_option_value_names_the_kernel(fake):
    x, y, out = _arrays()
    with pytest.raises(KernelArgumentError, match=r"add_kernel.*num_warps must be a power of 2") as info:
        add_kernel[(1,)](x, y, out, 64, num_warps=3)
    # Triton checks it with an assert: code written for it catches AssertionError
    assert isinstance(info.value, AssertionError)
    assert f"{__file__}:{ADD_DEF_LINE}" in str(info.value)


@pytest.mark.parametrize("value", [2**64, -2**63 - 1, 2**70])
def test_int_outside_64_bits_is_an_overflow_error(fake, value):
    x, y, out = _arrays()
    with pytest.raises(OverflowError, match=r"argument 'n' of kernel 'add_kernel' .*does not fit in 64 bits") as info:
        add_kernel[(1,)](x, y, out, value)
    assert isinstance(info.value, KernelArgumentError)
    assert f"{__file__}:{ADD_DEF_LINE}" in str(info.value)
    with pytest.raises(OverflowError, match=r"its element \[1\]"):  # inside a tuple argument too
        tuple_sum[(1,)]((1, value), out)


@jit
def tuple_sum(t, out_ptr):
    tl.store(out_ptr, (t[0] + t[1]).to(tl.float32))


@jit
def store_scalar(v, out_ptr):
    tl.store(out_ptr, v)


@pytest.mark.parametrize("value, dtype", [(2**64 - 1, np.uint64), (2**63, np.uint64), (-2**63, np.int64),
                                          (2**63 - 1, np.int64)])
@pytest.mark.parametrize("interpret", ["1", "0"])
def test_ints_at_the_64_bit_edges_pass_exactly(value, dtype, interpret, monkeypatch):
    monkeypatch.setenv("TEGULA_INTERPRET", interpret)  # the interpreter, the CPU backend
    out = np.zeros(1, dtype)
    store_scalar[(1,)](value, out)
    assert int(out[0]) == value


@pytest.mark.parametrize("value, kind", [("text", "str"), ([1, 2], "list"), ({"a": 1}, "dict"),
                                         (object(), "object"), ((1, "a"), "tuple"), (2**70, "int")])
def test_unsupported_argument_types(fake, value, kind):
    x, y, out = _arrays()
    with pytest.raises(KernelArgumentError, match=rf"argument 'y_ptr' of kernel 'add_kernel' .* is a {kind}"):
        add_kernel[(1,)](x, value, out, 64)


def test_launch_options_reach_the_compiler(fake):
    x, y, out = _arrays()
    c = add_kernel[(1,)](x, y, out, 64, num_warps=8, num_stages=2, num_ctas=1, maxnreg=128, debug=True)
    opts = fake.frontend_calls[-1][4]
    assert (opts.num_warps, opts.num_stages, opts.maxnreg, opts.debug) == (8, 2, 128, True)
    md = c.metadata
    assert (md.num_warps, md.num_stages, md.num_ctas, md.debug, md.shared) == (8, 2, 1, True, 128)


def test_jit_debug_and_debug_knob(fake, monkeypatch):
    @jit(debug=True)
    def dk(x_ptr):
        pass

    x = np.zeros(4, np.float32)
    assert dk[(1,)](x).metadata.debug is True
    assert add_kernel[(1,)](x, x, x, 4).metadata.debug is False
    monkeypatch.setenv("TEGULA_DEBUG", "1")
    assert add_kernel[(1,)](x, x, x, 4).metadata.debug is True


def test_keyword_only_parameters_cannot_be_launched(fake):
    @jit
    def kw(x_ptr, *, n):
        pass

    with pytest.raises(KernelArgumentError, match="'n' is keyword-only"):
        kw[(1,)](np.zeros(4, np.float32), n=3)


def test_parameters_named_like_builtins_and_no_parameters(fake):
    @jit
    def odd(len, tuple, int, float, grid_):
        pass

    @jit
    def empty():
        pass

    odd[(2,)](1, 2, 3, 4.0, 5)
    empty[(1,)]()
    empty[[3]]()
    assert [launch[1] for launch in fake.launches] == [(2, 1, 1), (1, 1, 1), (3, 1, 1)]


def test_duplicate_argument_names_the_kernel(fake):
    x, y, out = _arrays()
    with pytest.raises(TypeError, match="add_kernel.* multiple values for argument 'n'"):
        add_kernel[(1,)](x, y, out, 64, n=64)


def test_default_fp_fusion_knob_is_read_at_launch_and_recompiles(fake, monkeypatch):
    """TRITON_DEFAULT_FP_FUSION sets the default of enable_fp_fusion when a launch does
    not give it (Triton's knobs.language.default_fp_fusion); a change between launches
    recompiles, and a launch's own enable_fp_fusion wins."""
    x, y, out = _arrays()
    monkeypatch.delenv("TEGULA_DEFAULT_FP_FUSION", raising=False)
    add_kernel[(1,)](x, y, out, 64)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    add_kernel[(1,)](x, y, out, 64)
    add_kernel[(1,)](x, y, out, 64, enable_fp_fusion=True)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    add_kernel[(1,)](x, y, out, 64)  # compiled before with fusion on: no new compile
    assert [call[4].enable_fp_fusion for call in fake.frontend_calls] == [True, False, True]
    tegula.knobs.language.default_fp_fusion = False  # Triton's knob object sets the same
    try:
        add_kernel[(1,)](x, y, out, 63)  # a new specialization: compiled with the knob's default
        assert len(fake.frontend_calls) == 4 and fake.frontend_calls[-1][4].enable_fp_fusion is False
    finally:
        del tegula.knobs.language.default_fp_fusion
