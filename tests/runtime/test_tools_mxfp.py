"""`tegula.tools.mxfp` (Triton's `triton.tools.mxfp`): FP4 E2M1 and E8M0 scale tensors."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tegula.tools.mxfp import MXFP4Tensor, MXScaleTensor  # noqa: E402

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_every_fp4_code_decodes_and_encodes_back():
    codes = torch.arange(16, dtype=torch.uint8)
    t = MXFP4Tensor(size=(16,))
    t.data = codes
    values = t.to(torch.float32)
    assert values[:8].tolist() == E2M1 and values[8:].abs().tolist() == E2M1 and torch.signbit(values[8:]).all()
    assert torch.equal(MXFP4Tensor(values).data, codes)


def test_floats_round_to_the_nearest_value_ties_to_even_saturating():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 1e6, -0.3, -5.5, float("nan")])
    got = MXFP4Tensor(x).to(torch.float32).tolist()
    assert got == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, -0.5, -6.0, 6.0]
    # off the ties, the nearest representable value
    y = torch.randn(1000) * 3
    table = torch.tensor(E2M1)
    expect = (y.abs().clamp(max=6).unsqueeze(-1) - table).abs().min(-1).values
    assert torch.allclose((MXFP4Tensor(y).to(torch.float32).abs() - y.abs().clamp(max=6)).abs(), expect)


def test_packing_two_codes_per_byte_along_a_dimension():
    t = MXFP4Tensor(size=(6, 10)).random()
    for dim in (0, 1):
        packed = t.to_packed_tensor(dim=dim)
        assert packed.dtype == torch.uint8 and packed.shape[dim] == t.data.shape[dim] // 2
        assert torch.equal(t.unpack_packed_tensor(packed, dim, t.data.shape), t.data)
    first = t.to_packed_tensor(dim=1)[0, 0].item()
    assert first == t.data[0, 0].item() | (t.data[0, 1].item() << 4)
    with pytest.raises(ValueError, match="even size"):
        MXFP4Tensor(size=(3, 3)).to_packed_tensor(dim=0)


def test_e8m0_scales():
    s = MXScaleTensor(torch.tensor([1.0, 0.5, 3.0, 2.0 ** -127, 2.0 ** 127, 0.0, -1.0, float("inf")]))
    assert s.data.tolist() == [127, 126, 129, 0, 254, 255, 255, 255]
    decoded = s.to(torch.float32)
    assert decoded[:3].tolist() == [1.0, 0.5, 4.0] and torch.isnan(decoded[5:]).all()
    r = MXScaleTensor(size=(1000,)).random(0.25, 8.0).to(torch.float64)
    assert set(r.unique().tolist()) <= {0.25, 0.5, 1.0, 2.0, 4.0, 8.0} and len(r.unique()) == 6
