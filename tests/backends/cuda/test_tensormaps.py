"""The launcher's tensor maps without a GPU: `TensorMapEncoder` encodes a map once per
(base, shape, strides) and reuses it, hands the driver dims and byte strides innermost
first, and rejects what TMA cannot take with a message naming the kernel; specs
round-trip through the metadata's JSON."""
from __future__ import annotations

import pytest

from tegula.backends.cuda.tensormaps import TensorMapEncoder
from tegula.backends.cuda.tma import TensorMapSpec
from tegula.errors import KernelArgumentError

SPEC = TensorMapSpec(("arg", 0), (("arg", 3), ("arg", 5)), (("arg", 5), ("const", 1)), "f16", (64, 128), 128,
                     False, 64)


class FakeMap:
    def __init__(self, address: int) -> None:
        self.address = address

    def getPtr(self) -> int:
        return self.address


def test_maps_are_encoded_once_per_tensor_and_reused():
    calls = []

    def encode(spec, base, dims, byte_strides):
        calls.append((base, dims, byte_strides))
        return FakeMap(0x1000 * len(calls))

    enc = TensorMapEncoder(SPEC, "k", encode)
    first = enc.address(0x7F0000, (100, 72), (72, 1))
    assert enc.address(0x7F0000, (100, 72), (72, 1)) == first
    assert calls == [(0x7F0000, (72, 100), (144,))]  # innermost first, strides in bytes
    assert enc.address(0x7F0100, (100, 72), (72, 1)) != first and len(calls) == 2


@pytest.mark.parametrize("base, shape, strides, message", [
    (0x7F0008, (100, 72), (72, 1), "16-byte aligned"),
    (0x7F0000, (0, 72), (72, 1), r"shape must be in \[1, 2\*\*32\]"),
    (0x7F0000, (100, 72), (60, 1), "multiples of 16 bytes"),
])
def test_what_tma_cannot_take_is_a_clear_error(base, shape, strides, message):
    enc = TensorMapEncoder(SPEC, "my_kernel", lambda *a: FakeMap(1))
    with pytest.raises(KernelArgumentError, match=f"kernel 'my_kernel'.*{message}"):
        enc.address(base, shape, strides)


def test_specs_round_trip_through_json():
    assert TensorMapSpec.from_json(SPEC.to_json()) == SPEC
    assert SPEC.copies == 1
