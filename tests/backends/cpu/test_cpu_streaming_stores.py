"""Streaming (non-temporal) stores of the CPU backend (`backends/cpu/streaming_stores.py`):
large outputs written through them match numpy and the regular stores bit for bit, at
any alignment of the output and for element sizes 1 to 8; the launch asks for them only
for buffers beyond the threads' private caches; kernels with atomics never use them."""
import numpy as np
import pytest

import tegula
import tegula.language as tl


@pytest.fixture
def stream_words(monkeypatch):
    """The stream word of every CPU launch's `sizes`, in launch order."""
    from tegula.backends.cpu.backend import CpuProgram

    words = []
    pack = CpuProgram._pack

    def spy(self, args, stream_bytes=0):
        slots, sizes, found = pack(self, args, stream_bytes)
        words.append(sizes[2 * max(len(self.types), 1) + 1])
        return slots, sizes, found
    monkeypatch.setattr(CpuProgram, "_pack", spy)
    return words


@tegula.jit
def affine_rows(x, o, M, C: tl.constexpr, BR: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.arange(0, C)
    m = rows[:, None] < M
    v = tl.load(x + rows[:, None] * C + cols[None, :], mask=m, other=0)
    tl.store(o + rows[:, None] * C + cols[None, :], v * 3 + 1, mask=m)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8])
@pytest.mark.parametrize("shift", [0, 1, 3])
def test_streamed_rows_match_regular_stores(cpu, monkeypatch, stream_words, dtype, shift):
    from tegula.backends.cpu import backend

    monkeypatch.setattr(backend, "_PRIVATE_CACHE", 1024)  # stream anything over 1 KiB a thread
    rng = np.random.default_rng()
    M, C = 45, 1024  # the last program's rows are masked: its store takes the checked path
    x = (rng.standard_normal((M, C)) * 20).astype(dtype)
    # the output `shift` elements past an allocation's start: lines split at both ends
    streamed = np.zeros(M * C + 8, dtype)[shift:shift + M * C].reshape(M, C)
    affine_rows[(triton_cdiv(M, 4),)](x, streamed, M, C=C, BR=4)
    assert stream_words[-1] == 1 << 1  # argument 1, `o`
    monkeypatch.setenv("TEGULA_CPU_STREAMING_STORES", "0")
    regular = np.zeros((M, C), dtype)
    affine_rows[(triton_cdiv(M, 4),)](x, regular, M, C=C, BR=4)
    assert stream_words[-1] == 0
    expected = (x * dtype(3) + dtype(1)).astype(dtype)
    np.testing.assert_array_equal(streamed, expected)
    np.testing.assert_array_equal(streamed, regular)


def test_the_code_has_a_streaming_path(cpu):
    x = np.zeros((8, 1024), np.float32)
    k = affine_rows.warmup(x, x.copy(), 8, C=1024, BR=4, grid=(2,))
    assert "!nontemporal" in k.asm["llir"]


def test_small_outputs_do_not_stream(cpu, stream_words):
    x = np.ones((8, 1024), np.float32)  # 32 KiB, inside any core's L2
    o = np.zeros_like(x)
    affine_rows[(2,)](x, o, 8, C=1024, BR=4)
    assert stream_words == [0]
    np.testing.assert_array_equal(o, 4 * x)


@tegula.jit
def rows_and_a_counter(x, o, count, C: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, C)
    tl.store(o + r * C + cols, tl.load(x + r * C + cols) + 1)
    tl.atomic_add(count, 1)


def test_kernels_with_atomics_never_stream(cpu):
    # programs of such a kernel may read each other's rows once a counter says so
    x = np.zeros((4, 1024), np.float32)
    k = rows_and_a_counter.warmup(x, x.copy(), np.zeros(1, np.int32), C=1024, grid=(4,))
    assert "!nontemporal" not in k.asm["llir"]


def triton_cdiv(a, b):
    return (a + b - 1) // b
