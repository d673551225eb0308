"""The generated launcher, against a fake CUDA driver (no GPU needed): argument packing
into the pre-built `void**` array, pointer extraction from every array kind, the grid,
and the checked-mode error report."""
from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from tegula.backends.cuda import launcher as L
from tegula.errors import DeviceAssertionError, KernelArgumentError, OutOfBoundsError


class FakeDriver:
    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        self.calls = []

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        # read back what the kernel would see through the void** array
        ptrs = (ctypes.c_void_p * self.n).from_address(params)
        self.calls.append(((gx, gy, gz), (bx, by, bz), shared, stream, [p for p in ptrs]))
        return (0,)


class CudaArray:
    """Anything with __cuda_array_interface__ (as CuPy and numba expose)."""

    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (4,), "typestr": "<f4", "version": 3}


@pytest.fixture
def fake(monkeypatch):
    drv = FakeDriver()
    monkeypatch.setattr(L.drv, "cu", lambda: drv)
    monkeypatch.setattr(L, "stream_getter", lambda: (lambda d: 1234))
    return drv


def test_packs_arguments_in_place(fake):
    md = {"name": "k", "num_warps": 8, "shared": 4096}
    types = ["ptr<f32>", "ptr<f16>", "i32", "f32", "i1", "i64"]
    fake.n = len(types)
    launch = L.make_launcher("FN", md, types, 0, indices=[0, 2, 3, 4, 5, 6],
                             arg_names=["x", "y", "n", "alpha", "flag", "big"])
    x = SimpleNamespace(data_ptr=lambda: 0x1000)
    launch((3, 1, 1), [x, "BLOCK-constexpr", CudaArray(0x2000), 7, 2.5, True, 2**40])
    grid, block, shared, stream, slots = fake.calls[-1]
    assert grid == (3, 1, 1) and block == (256, 1, 1) and shared == 4096 and stream == 1234
    as_int = [ctypes.c_int64.from_address(s).value for s in slots]
    assert as_int[0] == 0x1000 and as_int[1] == 0x2000
    assert ctypes.c_int32.from_address(slots[2]).value == 7
    assert ctypes.c_float.from_address(slots[3]).value == 2.5
    assert ctypes.c_int32.from_address(slots[4]).value == 1
    assert as_int[5] == 2**40
    launch((np.int64(2), 1, 1), [x, None, CudaArray(0x3000), 8, 1.0, False, 1])  # any integral grid
    assert fake.calls[-1][0] == (2, 1, 1)
    launch((0, 1, 1), [x, None, CudaArray(0x3000), 8, 1.0, False, 1])
    assert len(fake.calls) == 2, "an empty grid launches nothing"


def test_host_arrays_are_rejected(fake):
    fake.n = 1
    launch = L.make_launcher("FN", {"name": "k", "num_warps": 4}, ["ptr<f32>"], 0, arg_names=["x"])
    with pytest.raises(KernelArgumentError, match="argument 'x' of kernel 'k' is in host memory"):
        launch((1, 1, 1), [np.zeros(4, np.float32)])
    with pytest.raises(KernelArgumentError, match="not a GPU array"):
        launch((1, 1, 1), ["a string"])


def test_narrow_float_scalars_pass_their_bits():
    assert L.narrow_float_bits(1.0, "f16") == 0x3C00
    assert L.narrow_float_bits(1.0, "bf16") == 0x3F80
    assert L.slot_type("f16") is ctypes.c_uint16 and L.slot_type("u64") is ctypes.c_uint64


def test_extent_of_views():
    a = np.zeros((4, 8), np.float32)
    assert L.extent_of(a) == 4 * 8 * 4
    assert L.extent_of(a[:, ::2]) == (3 * 8 + 3 * 2 + 1) * 4
    assert L.extent_of(a[:0]) == 0


def test_recorded_errors_become_located_exceptions():
    sites = [("load", "/src/k.py", 12, 4, "x_ptr"), ("assert", "/src/k.py", 20, 4, "n > 0")]
    L.raise_recorded_error([0] * 8, sites, "k")  # nothing recorded: no error
    with pytest.raises(OutOfBoundsError) as info:
        L.raise_recorded_error([1, 0, 3, 0, 0, 130, 0, 0], sites, "k")
    assert info.value.pid == (3, 0, 0) and info.value.loc.line == 12 and "offset 130" in str(info.value)
    with pytest.raises(DeviceAssertionError, match="n > 0"):
        L.raise_recorded_error([3, 1, 0, 1, 0, 0, 0, 0], sites, "k")


def test_uses_the_addresses_the_launch_path_read(fake):
    """The JIT launch path reads each torch tensor's data_ptr() for the alignment key and
    hands it over; the launcher must use it and not ask the tensor again, and fall back
    to the array itself where no address was handed over."""
    fake.n = 3
    md = {"name": "k", "num_warps": 4, "param_names": ["x", "y", "n", "BLOCK"]}  # BLOCK: a constexpr
    launch = L.make_launcher("FN", md, ["ptr<f32>", "ptr<f32>", "i32"], 0, indices=[0, 1, 2],
                             arg_names=["x", "y", "n"])
    assert launch.accepts_pointers
    launch((1, 1, 1), [CudaArray(0x4000), CudaArray(0x5000), 9, 64], 0x4000, None, None, None)  # one per parameter

    class Unasked:
        def data_ptr(self):
            raise AssertionError("data_ptr() asked a second time")

    launch((1, 1, 1), [Unasked(), CudaArray(0x5000), 9, 64], 0x4000, None, None, None)
    slots = fake.calls[-1][4]
    assert [ctypes.c_int64.from_address(s).value for s in slots[:2]] == [0x4000, 0x5000]
    launch((1, 1, 1), [SimpleNamespace(data_ptr=lambda: 0x6000), CudaArray(0x5000), 9, 64])  # no addresses
    assert ctypes.c_int64.from_address(fake.calls[-1][4][0]).value == 0x6000


def test_jit_launch_through_the_real_backend_with_a_fake_driver(fake, monkeypatch):
    """`kernel[grid](...)` → the runtime's launch function → the CUDA backend's compile
    (real PTX) and load → the generated launcher, with only the driver faked: the
    interfaces between the layers (values, one address per parameter, a trailing
    constexpr) must fit."""
    import tegula
    import tegula.language as tl
    from tegula.runtime import backend_registry

    monkeypatch.setattr(L.drv, "available", lambda: (True, ""))
    monkeypatch.setattr(L.drv, "capability", lambda device: 90)
    monkeypatch.setattr(L.drv, "load_function", lambda image, name, device, shared: ("MODULE", "FN"))
    monkeypatch.setattr(backend_registry, "_INSTANCES", {})  # made afresh, with the fake driver
    monkeypatch.setattr(backend_registry, "_MISSING", {})

    @tegula.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)

    fake.n = 3
    compiled = scale_kernel[(4,)](CudaArray(0x7000), CudaArray(0x8000), 100, BLOCK=32)
    assert compiled.metadata.target.backend == "cuda" and "ld.global" in compiled.asm["ptx"]
    grid, block, _shared, _stream, slots = fake.calls[-1]
    assert grid == (4, 1, 1) and block == (128, 1, 1)
    assert [ctypes.c_int64.from_address(s).value for s in slots[:2]] == [0x7000, 0x8000]
    assert ctypes.c_int32.from_address(slots[2]).value == 100


def test_explicit_stream_is_honoured(fake):
    """Triton's `CompiledKernel.run(..., stream, ...)` hands the launcher a stream: it
    launches there, not on the framework's current stream."""
    fake.n = 1
    launch = L.make_launcher("FN", {"name": "k", "num_warps": 4}, ["i32"], 0, arg_names=["n"])
    assert launch.accepts_stream
    launch((1, 1, 1), [3], stream=0xABC)
    assert fake.calls[-1][3] == 0xABC
    launch((1, 1, 1), [3])
    assert fake.calls[-1][3] == 1234, "no stream given: the current one"


def test_compiled_kernel_run_protocol_reaches_the_launcher(fake):
    """Inductor's launch: `bin.run(gx, gy, gz, stream, function, packed_metadata,
    launch_metadata, enter_hook, exit_hook, *params)` on a kernel rebuilt from its
    `__dict__` with `run`/`function`/`module` cleared, then `_init_handles()`."""
    from tegula.backends.compiler import GPUTarget
    from tegula.runtime.kernel import CompiledKernel, KernelMetadata

    fake.n = 1
    md = KernelMetadata(name="k", hash="h", num_warps=4, shared=0, param_names=["n", "B"], arg_names=["n"],
                        arg_indices=[0], target=GPUTarget("cuda", 90, 32))

    class Backend:
        name = "cuda"

        def load(self, compiled, device):
            return L.make_launcher("FN", compiled.metadata, ["i32"], 0, indices=[0], arg_names=["n"])

    k = CompiledKernel(None, {}, md, backend=Backend(), device=0)
    rebuilt = CompiledKernel.__new__(CompiledKernel)
    rebuilt.__dict__.update({**k.__dict__, "run": None, "function": None, "module": None})
    assert rebuilt.run is None
    rebuilt._init_handles()
    assert rebuilt.function is not None and rebuilt.module is not None
    seen = []
    rebuilt.run(2, 1, 1, 0x77, rebuilt.function, rebuilt.packed_metadata, "MD", seen.append,
                lambda m: seen.append(("exit", m)), 5, 64)
    assert fake.calls[-1][0] == (2, 1, 1) and fake.calls[-1][3] == 0x77
    assert seen == ["MD", ("exit", "MD")]


def test_tensor_maps_are_encoded_from_the_arguments_and_passed_after_them(fake, monkeypatch):
    """A TMA kernel's map parameter (after its own) is the address of the map encoded
    from the launch's base pointer, shape and strides; a warm launch reuses it."""
    from tegula.backends.cuda import tensormaps
    from tegula.backends.cuda.tma import TensorMapSpec

    encoded = []

    class Map:
        def __init__(self, n):
            self.n = n

        def getPtr(self):
            return 0xAB000 + self.n

    def encode(spec, base, dims, byte_strides):
        encoded.append((base, dims, byte_strides))
        return Map(len(encoded))
    monkeypatch.setattr(tensormaps, "encode_map", encode)
    spec = TensorMapSpec(("arg", 0), (("arg", 1), ("arg", 2)), (("arg", 2), ("const", 1)), "bf16", (64, 64), 128,
                         False, 64)
    md = {"name": "k", "num_warps": 4, "tensormaps": [spec.to_json()]}
    types = ["ptr<bf16>", "i32", "i32"]
    fake.n = len(types) + 1
    launch = L.make_launcher("FN", md, types, 0, arg_names=["a", "M", "K"])
    a = SimpleNamespace(data_ptr=lambda: 0x10000)
    launch((1, 1, 1), [a, 100, 72])
    launch((1, 1, 1), [a, 100, 72])
    assert encoded == [(0x10000, (72, 100), (144,))]
    assert fake.calls[-1][4][3] == 0xAB001  # the map's address, as cuLaunchKernel reads the parameter


def test_tensor_map_shapes_computed_from_arguments_are_evaluated_at_launch(fake, monkeypatch):
    """Tutorial 06's device descriptors span every head: shape [Z * H * N_CTX, D]. The
    launcher evaluates the product of the launch's values (not the kernel's i32)."""
    from tegula.backends.cuda import tensormaps
    from tegula.backends.cuda.tma import TensorMapSpec

    encoded = []

    class Map:
        def getPtr(self):
            return 0xCD000

    def encode(spec, base, dims, byte_strides):
        encoded.append((base, dims, byte_strides))
        return Map()
    monkeypatch.setattr(tensormaps, "encode_map", encode)
    rows = ("mul", ("mul", ("arg", 1), ("arg", 2)), ("add", ("arg", 3), ("const", 0)))
    spec = TensorMapSpec(("arg", 0), (rows, ("const", 64)), (("const", 64), ("const", 1)), "f16", (64, 128), 128,
                         False, 64)
    assert TensorMapSpec.from_json(spec.to_json()) == spec
    md = {"name": "k", "num_warps": 4, "tensormaps": [spec.to_json()]}
    types = ["ptr<f16>", "i32", "i32", "i32"]
    fake.n = len(types) + 1
    launch = L.make_launcher("FN", md, types, 0, arg_names=["q", "Z", "H", "N_CTX"])
    launch((1, 1, 1), [SimpleNamespace(data_ptr=lambda: 0x20000), 4, 32, 4096])
    assert encoded == [(0x20000, (64, 4 * 32 * 4096), (128,))]
