"""What PyTorch's Inductor and Dynamo use of Triton's runtime, on tegula: the
`triton.backends` registry, `make_backend`, `triton.knobs` and its hooks, the
`CompiledKernel` launch protocol, and pickling of kernels (compile workers send them
to the parent). The compiler pipeline is faked (`conftest.fake`)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import tegula.language as tl
from tegula import knobs
from tegula.backends.compiler import GPUTarget
from tegula.compat_surface.backends import backends
from tegula.compat_surface.backends.compiler import BaseBackend, CpuCompilerBackend, CudaCompilerBackend
from tegula.compiler.compiler import make_backend
from tegula.runtime.driver import CpuDriver, CudaDriver
from tegula.runtime.jit import jit
from tegula.runtime.kernel import CompiledKernel


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 128):
    pass


LAUNCHES: list = []


class PicklableBackend:
    """A backend that crosses pickling (the fixture's fake lives in a conftest)."""
    name = "interpreter"

    def load(self, compiled, device):
        return lambda grid, values: LAUNCHES.append((compiled.name, grid))


def _arrays(n: int = 64):
    return np.ones(n, np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)


@pytest.fixture
def hooks():
    """knobs.runtime with its hooks restored afterwards."""
    rt = knobs.runtime
    saved = {k: rt.__dict__[k] for k in ("jit_cache_hook", "jit_post_compile_hook")}
    yield rt
    for name in rt._CHAINS:
        getattr(rt, name).clear()
    rt.__dict__.update(saved)
    assert not rt.launch_hooked


# ---------------------------------------------------------------------------- triton.backends

def test_backends_registry():
    assert set(backends) >= {"cpu", "nvidia"}
    cpu, nvidia = backends["cpu"], backends["nvidia"]
    assert cpu.compiler is CpuCompilerBackend and cpu.driver is CpuDriver and cpu.driver.is_active()
    assert nvidia.compiler is CudaCompilerBackend and nvidia.driver is CudaDriver
    assert nvidia.driver.is_active() == CudaDriver.is_active()  # true only with a usable GPU
    assert issubclass(nvidia.compiler, BaseBackend)


def test_make_backend_hash_and_options():
    sm90 = make_backend(GPUTarget("cuda", 90, 32))
    sm80 = make_backend(GPUTarget("cuda", 80, 32))
    assert isinstance(sm90, CudaCompilerBackend) and sm90.hash() != sm80.hash()
    opts = sm90.parse_options({"num_warps": 8, "debug": True, "unknown_option": 1})
    assert opts.num_warps == 8 and opts.debug and not opts.checked and opts.num_stages == 3
    assert "fp8e4nv" in opts.supported_fp8_dtypes and "fp8e4nv" not in sm80.parse_options({}).supported_fp8_dtypes
    assert "num_warps" in opts.__dict__  # Inductor reads options.__dict__
    host = make_backend(GPUTarget("cpu", "x86_64", 1))
    assert isinstance(host, CpuCompilerBackend) and host.parse_options({}).backend_name == "cpu"
    with pytest.raises(RuntimeError, match="0 compatible backends"):
        make_backend(GPUTarget("hip", "gfx942", 64))


def test_arg_specialization_helpers():
    assert BaseBackend.get_arg_specialization(32, "int", align=True) == "D"
    assert BaseBackend.get_arg_specialization(33, "int", align=True) == ""
    assert BaseBackend.get_arg_specialization(32, "int", align=False) == ""
    assert BaseBackend.parse_attr("D") == [["tt.divisibility", 16]] and BaseBackend.parse_attr("") == []


# ---------------------------------------------------------------------------- triton.knobs

def test_env_knobs_read_and_set_tegula_config(monkeypatch, tmp_path):
    monkeypatch.delenv("TEGULA_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "t"))
    assert knobs.cache.dir == str(tmp_path / "t")
    knobs.cache.dir = str(tmp_path / "mine")
    try:
        from tegula.config import knobs as config
        assert config.cache_dir == str(tmp_path / "mine") == knobs.cache.dir
    finally:
        del knobs.cache.dir
    assert knobs.cache.dir == str(tmp_path / "t")
    monkeypatch.setenv("TEGULA_CHECKED", "1")
    assert knobs.compilation.checked is True
    monkeypatch.delenv("TEGULA_LIBDEVICE_PATH", raising=False)
    monkeypatch.delenv("TRITON_LIBDEVICE_PATH", raising=False)
    assert knobs.nvidia.libdevice_path is None  # Triton: None when unset (Inductor tests `is not None`)
    knobs.nvidia.libdevice_path = "/cuda/nvvm/libdevice/libdevice.10.bc"
    try:
        from tegula.config import knobs as config
        assert config.libdevice == "/cuda/nvvm/libdevice/libdevice.10.bc"
    finally:
        del knobs.nvidia.libdevice_path
    assert knobs.nvidia.libdevice_path is None


def test_launch_hooks_run_around_jit_launches(fake, hooks):
    calls = []
    hooks.launch_enter_hook.add(lambda md: calls.append(("enter", md.get()["name"], md.get()["stream"])))
    hooks.launch_exit_hook = lambda md: calls.append(("exit", md.get()["name"]))
    assert hooks.launch_hooked
    x, y, out = _arrays()
    add_kernel[(2,)](x, y, out, 64)
    assert calls == [("enter", "add_kernel", 0), ("exit", "add_kernel")]
    assert len(fake.launches) == 1
    hooks.launch_exit_hook = None
    hooks.launch_enter_hook.clear()
    assert not hooks.launch_hooked
    add_kernel[(2,)](x, y, out, 64)
    assert len(calls) == 2 and len(fake.launches) == 2


def test_launch_metadata_includes_the_kernels_own(fake, hooks):
    @jit(launch_metadata=lambda grid, md, args: {"flops": 2 * args["n"], "grid": grid})
    def k(x_ptr, n):
        pass

    x = np.zeros(8, np.float32)
    compiled = k.warmup(x, 8, grid=(1,))
    assert compiled.launch_metadata((1, 1, 1), 0, x, 8) is None  # no enter hook: nothing built
    got = []
    hooks.launch_enter_hook = lambda md: got.append(md.get())
    k[(3,)](x, 8)
    assert got == [{"name": "k", "function": compiled.function, "stream": 0, "flops": 16, "grid": (3, 1, 1)}]


def test_jit_cache_and_post_compile_hooks(fake, hooks):
    seen = []

    def cache_hook(**kw):
        seen.append(("cache", kw["repr"], kw["fn"].name, kw["compile"]["num_warps"], kw["already_compiled"]))
        return False

    hooks.jit_cache_hook = cache_hook
    hooks.jit_post_compile_hook = lambda **kw: seen.append(("post", kw["fn"].jit_function is add_kernel))
    x, y, out = _arrays()
    add_kernel[(1,)](x, y, out, 64, num_warps=2)
    add_kernel[(1,)](x, y, out, 64, num_warps=2)  # cached: no hook
    assert seen == [("cache", "add_kernel[num_warps=2, num_ctas=1, num_stages=3, enable_fp_fusion=True, "
                     "launch_cooperative_grid=False](x_ptr: *fp32, y_ptr: *fp32, out_ptr: *fp32, n: i32, "
                     "BLOCK: constexpr)", "add_kernel", 2, False), ("post", True)]
    hooks.jit_cache_hook = lambda **kw: True  # "skip": neither compiled nor launched
    add_kernel[(1,)](x, y, out, 63)
    assert len(fake.frontend_calls) == 1 and len(fake.launches) == 2


# ---------------------------------------------------------------------------- CompiledKernel

def test_triton_run_protocol_and_rebuilt_kernel(fake, hooks):
    x, y, out = _arrays()
    compiled = add_kernel.warmup(x, y, out, 64, grid=(1,))
    compiled._init_handles()
    assert compiled.function is not None and compiled.module is not None
    hooks.launch_enter_hook = lambda md: None
    md = compiled.launch_metadata((4, 1, 1), 0, x, y, out, 64, 128)
    entered = []
    compiled.run(4, 1, 1, 0, compiled.function, compiled.packed_metadata, md, entered.append, None,
                 x, y, out, 64, 128)
    assert entered == [md] and fake.launches[-1][1] == (4, 1, 1)
    # what Inductor sends between processes: the __dict__ with the loaded state cleared
    # (and the JITFunction's Python function dropped, `prepare_for_pickle`)
    fn, add_kernel.fn = add_kernel.fn, None
    compiled.backend = PicklableBackend()
    try:
        state = pickle.loads(pickle.dumps({**compiled.__dict__, "run": None, "function": None, "module": None,
                                           "_launch": None}))
    finally:
        add_kernel.fn = fn
    rebuilt = CompiledKernel.__new__(CompiledKernel)
    rebuilt.__dict__.update(state)
    rebuilt._init_handles()
    rebuilt.run(2, 1, 1, 0, rebuilt.function, rebuilt.packed_metadata, None, None, None, x, y, out, 64, 128)
    assert LAUNCHES[-1] == ("add_kernel", (2, 1, 1))


def test_compiled_kernel_pickles_without_its_loaded_state(fake):
    x, y, out = _arrays()
    compiled = add_kernel[(1,)](x, y, out, 64)
    fn, add_kernel.fn = add_kernel.fn, None
    compiled.backend = PicklableBackend()
    try:
        again = pickle.loads(pickle.dumps(compiled))
    finally:
        add_kernel.fn = fn
    assert again.function is None and "_launch" not in again.__dict__
    again[(3,)](x, y, out, 64, 128)
    assert LAUNCHES[-1] == ("add_kernel", (3, 1, 1))


def test_jit_function_pickles_as_inductor_prepares_it(fake):
    x, y, out = _arrays()
    add_kernel[(1,)](x, y, out, 64)
    assert isinstance(add_kernel.used_global_vals, dict)
    saved = (add_kernel.fn, add_kernel.__globals__, add_kernel.used_global_vals)
    add_kernel.fn, add_kernel.__globals__, add_kernel.used_global_vals = None, None, None
    try:
        again = pickle.loads(pickle.dumps(add_kernel))
    finally:
        add_kernel.fn, add_kernel.__globals__, add_kernel.used_global_vals = saved
    assert again.arg_names == add_kernel.arg_names and again.cache_key == add_kernel.cache_key
    assert again.kernel_cache == {} and again.fn is None


# ---------------------------------------------------------------------------- user kernels in graphs

def test_specialization_helpers_and_paths():
    from tegula._utils import find_paths_if, get_iterable_path
    from tegula.runtime.jit import create_specialize_impl, mangle_type

    spec = create_specialize_impl(BaseBackend.get_arg_specialization)
    x = np.zeros(8, np.float32)
    assert spec(x) == ("*fp32", "D") and spec(32) == ("i32", "D") and spec(33) == ("i32", "")
    assert spec(1) == ("constexpr", 1) and spec(None) == ("constexpr", None) and spec(2.0) == ("fp32", None)
    assert spec(32, specialize_value=False) == ("i32", "")
    assert spec((x, 48)) == (("*fp32", "i32"), ("D", "D"))
    assert mangle_type(x) == "*fp32" and mangle_type(2**40) == "i64"
    keys = ["D", 3, ("", "D")]
    paths = find_paths_if(keys, lambda _, v: isinstance(v, str))
    assert paths == [(0,), (2, 0), (2, 1)] and get_iterable_path(keys, (2, 1)) == "D"


def test_ttir_summary_states_tegulas_written_and_read_arguments():
    from tegula.compat_surface._C.libtriton import ir
    from tegula.compat_surface.ttir_summary import summarize

    module = summarize("k", [("x", "ptr<f32>"), ("out", "ptr<f32>"), ("n", "i32")], {"out"}, {"x"})
    seen = []
    module.walk(lambda op: seen.append((op.get_name(), [o.id() for o in op.operands])))
    block = module.func.get_region(0).blocks[0]
    x, out = block.get_argument(0).id(), block.get_argument(1).id()
    assert seen == [("tt.load", [x]), ("tt.store", [out]), ("tt.return", []), ("tt.func", []),
                    ("builtin.module", [])]
    assert module.verify() and module.func.get_str_attr("sym_name") == "k"
    assert "tt.func public @k(%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>, %arg2: i32)" in str(module)
    ir.load_dialects(ir.context())


def test_constexpr_function_runs_at_compile_time_and_keys_the_cache():
    import tegula

    @tegula.constexpr_function
    def doubled(n):
        return 2 * n

    @jit
    def fill(out_ptr, N: tl.constexpr):
        B: tl.constexpr = doubled(N)
        offs = tl.arange(0, B)
        tl.store(out_ptr + offs, offs * 0 + B)

    out = np.zeros(8, np.int32)
    fill[(1,)](out, 4)
    assert (out == 8).all() and doubled(3) == 6 and doubled.src.startswith("def doubled")
    key = fill.cache_key
    doubled._src = "def doubled(n):\n    return 3 * n\n"  # an edited helper changes the kernel's key
    fill.clear_cache()
    assert fill.cache_key != key


def test_user_defined_triton_builtins_get_wrapped_values_and_the_semantic():
    """Functions marked `__triton_builtin__` (PyTorch's `triton_helpers.if_mask`,
    `constexpr_next_power_of_2`) see constexprs as constexprs and get `_builder`."""
    seen = []

    def next_pow2(n, *, _builder=None):
        seen.append((type(n).__name__, _builder is not None))
        return tl.constexpr(1 << (n.value - 1).bit_length())

    next_pow2.__triton_builtin__ = True

    @jit
    def k(out_ptr, R: tl.constexpr):
        N: tl.constexpr = next_pow2(R)
        offs = tl.arange(0, N)
        tl.store(out_ptr + offs, offs * 0 + N, mask=offs < R)

    out = np.zeros(8, np.int32)
    k[(1,)](out, 5)
    assert seen == [("constexpr", True)] and out.tolist() == [8] * 5 + [0] * 3


def test_per_call_warmup_and_compiled_launches_take_their_grid_and_hooks(fake, hooks):
    """Triton's tutorial 02 calls `warmup` and launches `compiled[(n, 1, 1)](...)` on every
    call: the cached entry points and the reused launcher must still see each grid, the
    hooks set later, and leave the kernel picklable."""
    x, y, out = _arrays()
    first = add_kernel.warmup(x, y, out, 64, grid=(1,))
    assert add_kernel.warmup(x, y, out, 64, grid=(1,)) is first
    first[(2, 1, 1)](x, y, out, 64)
    first[(3, 1, 1)](x, y, out, 64)
    first[(2, 1, 1)](x, y, out, 64)
    first[(4,)](x, y, out, 64)
    assert [g for _c, g, _v in fake.launches] == [(2, 1, 1), (3, 1, 1), (2, 1, 1), (4, 1, 1)]
    calls = []
    hooks.launch_enter_hook = lambda md: calls.append(md.get()["name"])
    first[(2, 1, 1)](x, y, out, 64)  # the launcher made before the hook was set
    assert calls == ["add_kernel"] and len(fake.launches) == 5
    assert "warmup" in add_kernel.__dict__  # kept on the kernel, left out of what pickles
    state = add_kernel.__getstate__()
    assert "warmup" not in state and "run" not in state
