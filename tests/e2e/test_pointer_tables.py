"""Pointer tables on the interpreter: a kernel loads `data_ptr()`s from an int64 tensor,
casts them to pointers and accesses memory through them (grouped GEMM, MoE). The
addresses resolve to live torch CPU tensors / numpy arrays, bounds-checked."""
from __future__ import annotations

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.errors import OutOfBoundsError

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def interpreter(request, monkeypatch):
    """Host arrays run on the compiled CPU backend by default: these tests are about
    the interpreter (its messages name the array an address resolves to), except the
    one that asks for the CPU backend."""
    if "cpu_backend" not in request.fixturenames:
        monkeypatch.setenv("TEGULA_INTERPRET", "1")


@triton.jit
def _grouped_matmul(a_table, b_table, c_table, sizes, lds, n_groups, NUM_PROGRAMS: tl.constexpr,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tile = tl.program_id(0)
    first = 0
    for g in range(n_groups):
        m, n, k = tl.load(sizes + 3 * g), tl.load(sizes + 3 * g + 1), tl.load(sizes + 3 * g + 2)
        tiles_n = tl.cdiv(n, BN)
        count = tl.cdiv(m, BM) * tiles_n
        while tile >= first and tile < first + count:
            lda, ldb, ldc = tl.load(lds + 3 * g), tl.load(lds + 3 * g + 1), tl.load(lds + 3 * g + 2)
            a = tl.load(a_table + g).to(tl.pointer_type(tl.float16))
            b = tl.load(b_table + g).to(tl.pointer_type(tl.float16))
            c = tl.load(c_table + g).to(tl.pointer_type(tl.float16))
            rm = ((tile - first) // tiles_n) * BM + tl.arange(0, BM)
            rn = ((tile - first) % tiles_n) * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BK)):
                ks = kk * BK + rk
                x = tl.load(a + rm[:, None] * lda + ks[None, :], mask=(rm[:, None] < m) & (ks[None, :] < k), other=0)
                y = tl.load(b + ks[:, None] * ldb + rn[None, :], mask=(ks[:, None] < k) & (rn[None, :] < n), other=0)
                acc += tl.dot(x, y)
            inside = (rm[:, None] < m) & (rn[None, :] < n)
            tl.store(c + rm[:, None] * ldc + rn[None, :], acc.to(tl.float16), mask=inside)
            tile += NUM_PROGRAMS
        first += count


def _grouped(As, Bs, Cs, num_programs=4):
    table = lambda ts: torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)  # noqa: E731
    sizes = torch.tensor([[a.shape[0], b.shape[1], a.shape[1]] for a, b in zip(As, Bs)], dtype=torch.int32)
    lds = torch.tensor([[a.stride(0), b.stride(0), c.stride(0)] for a, b, c in zip(As, Bs, Cs)], dtype=torch.int32)
    _grouped_matmul[(num_programs,)](table(As), table(Bs), table(Cs), sizes, lds, len(As), num_programs, 16, 16, 16)


def test_grouped_matmul_through_pointer_tables():
    shapes = [(20, 33, 17), (16, 16, 16), (5, 40, 24)]
    As = [torch.randn(m, k, dtype=torch.float16) for m, n, k in shapes]
    Bs = [torch.randn(k, n, dtype=torch.float16) for m, n, k in shapes]
    Cs = [torch.zeros(m, n, dtype=torch.float16) for m, n, k in shapes]
    _grouped(As, Bs, Cs)
    for a, b, c in zip(As, Bs, Cs):
        torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_views_resolve_to_their_storage():
    base = torch.randn(64, 48, dtype=torch.float16)
    As = [base[3:20, 5:22]]  # a strided view: its data_ptr lies inside base's storage
    Bs = [torch.randn(17, 9, dtype=torch.float16)]
    Cs = [torch.zeros(17, 9, dtype=torch.float16)]
    _grouped(As, Bs, Cs, num_programs=2)
    torch.testing.assert_close(Cs[0].float(), As[0].float() @ Bs[0].float(), rtol=1e-2, atol=1e-2)


@triton.jit
def _scale_through_table(table, sizes, out, BLOCK: tl.constexpr):
    g = tl.program_id(0)
    p = tl.load(table + g).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    n = tl.load(sizes + g)
    tl.store(out + g * BLOCK + offs, tl.load(p + offs, mask=offs < n, other=0) * 2, mask=offs < n)


def test_numpy_arrays_reachable_from_the_caller():
    rng = np.random.default_rng()
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (3, 16, 11)]
    table = np.array([a.ctypes.data for a in arrays], np.int64)
    out = np.zeros((3, 16), np.float32)
    _scale_through_table[(3,)](table, np.array([a.size for a in arrays], np.int32), out, 16)
    for g, a in enumerate(arrays):
        np.testing.assert_allclose(out[g, :a.size], 2 * a)


def test_a_table_pointer_into_an_argument():
    x = torch.randn(8)
    out = torch.zeros(16)
    _scale_through_table[(1,)](torch.tensor([x.data_ptr()]), torch.tensor([8], dtype=torch.int32), out, 16)
    torch.testing.assert_close(out[:8], 2 * x)


def test_reading_past_a_table_array_is_located():
    x = torch.randn(5)
    with pytest.raises(OutOfBoundsError, match=r"torch tensor float32\[5\] .*found by address.*outside") as info:
        _scale_through_table[(1,)](torch.tensor([x.data_ptr()]), torch.tensor([6], dtype=torch.int32),
                                   torch.zeros(16), 16)
    assert info.value.loc.line == _scale_through_table.starting_line_number + 6


def test_an_unknown_address_is_located():
    with pytest.raises(OutOfBoundsError, match=r"no argument buffer .*no live host array") as info:
        _scale_through_table[(1,)](torch.tensor([0x1234560]), torch.tensor([4], dtype=torch.int32),
                                   torch.zeros(16), 16)
    assert info.value.loc.line == _scale_through_table.starting_line_number + 6


@pytest.fixture
def cpu_backend(monkeypatch):
    from tegula.runtime import backend_registry

    monkeypatch.setenv("TEGULA_CPU_BACKEND", "1")
    monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    factory = backend_registry._FACTORIES["cpu"]
    backend_registry.register_backend("cpu", factory)  # forget an earlier "unavailable"
    _scale_through_table.clear_cache()
    yield
    monkeypatch.undo()
    backend_registry.register_backend("cpu", factory)
    _scale_through_table.clear_cache()


def test_pointer_tables_on_the_cpu_backend(cpu_backend):
    xs = [torch.randn(n) for n in (3, 16, 9)]
    out = torch.zeros(3, 16)
    sizes = torch.tensor([x.numel() for x in xs], dtype=torch.int32)
    ck = _scale_through_table[(3,)](torch.tensor([x.data_ptr() for x in xs]), sizes, out, 16)
    assert ck.metadata.backend == "cpu"
    for g, x in enumerate(xs):
        torch.testing.assert_close(out[g, :x.numel()], 2 * x)
    with pytest.raises(OutOfBoundsError, match="no argument buffer"):
        _scale_through_table[(1,)](torch.tensor([0x1234560]), torch.tensor([4], dtype=torch.int32), out, 16)


def test_numpy_arrays_held_by_an_object():
    class Experts:
        def __init__(self):
            rng = np.random.default_rng()
            self.weights = [rng.standard_normal(16).astype(np.float32) for _ in range(2)]

    experts = Experts()
    table = np.array([w.ctypes.data for w in experts.weights], np.int64)
    out = np.zeros((2, 16), np.float32)
    _scale_through_table[(2,)](table, np.array([16, 16], np.int32), out, 16)
    np.testing.assert_allclose(out, 2 * np.stack(experts.weights))


@pytest.fixture
def young_objects_stay_young():
    """No collection moves the tensors a test makes out of the youngest generation."""
    import gc

    gc.disable()
    yield
    gc.enable()


def test_cpu_launches_look_up_only_the_table_addresses(cpu_backend, young_objects_stay_young):
    from tegula.backends.host_arrays import full_walks

    xs = [torch.randn(n) for n in (3, 16, 9)]
    out = torch.zeros(3, 16)
    sizes = torch.tensor([x.numel() for x in xs], dtype=torch.int32)
    walks = full_walks()
    for _ in range(2):  # new tensors (the youngest objects), then the index's answer
        out.zero_()
        _scale_through_table[(3,)](torch.tensor([x.data_ptr() for x in xs]), sizes, out, 16)
        for g, x in enumerate(xs):
            torch.testing.assert_close(out[g, :x.numel()], 2 * x)
    assert full_walks() == walks


def test_a_tensor_whose_storage_moved_is_found_again(cpu_backend):
    x = torch.randn(4)
    out = torch.zeros(16)
    _scale_through_table[(1,)](torch.tensor([x.data_ptr()]), torch.tensor([4], dtype=torch.int32), out, 16)
    x.resize_(1 << 16)  # a new storage; the index still knows the old one
    x.normal_()
    _scale_through_table[(1,)](torch.tensor([x.data_ptr()]), torch.tensor([16], dtype=torch.int32), out, 16)
    torch.testing.assert_close(out, 2 * x[:16])


def _read_through_a_fresh_tensor():
    """A launch reading a 1 MiB tensor through a table; the tensor dies on return (in a
    frame of its own: a stack walk's snapshot of a frame's locals holds them)."""
    x = torch.randn(1 << 18)  # 1 MiB: its own mapping, unmapped when freed
    table, sizes, out = torch.tensor([x.data_ptr()]), torch.tensor([16], dtype=torch.int32), torch.zeros(16)
    _scale_through_table[(1,)](table, sizes, out, 16)  # the index now holds x
    torch.testing.assert_close(out, 2 * x[:16])
    return table, sizes, out


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_the_address_of_a_freed_tensor_is_reported(request, backend):
    if backend == "cpu":
        request.getfixturevalue("cpu_backend")
    table, sizes, out = _read_through_a_fresh_tensor()
    with pytest.raises(OutOfBoundsError, match="no argument buffer"):
        _scale_through_table[(1,)](table, sizes, out, 16)
