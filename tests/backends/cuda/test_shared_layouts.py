"""Shared-memory swizzles against their definitions written per element."""
import pytest

from tegula.backends.cuda.shared_layouts import nvmma_offsets, swizzled_offsets


def flat(r, c, cols):
    return r * cols + c


@pytest.mark.parametrize("rows,cols,elem_bytes,swizzle", [
    (64, 64, 2, 128), (128, 128, 2, 128), (64, 32, 2, 64), (64, 16, 2, 32), (32, 128, 1, 128),
    (16, 32, 4, 128), (64, 64, 2, 0), (4, 64, 2, 128)])
def test_nvmma_matches_the_hardware_swizzle(rows, cols, elem_bytes, swizzle):
    m = nvmma_offsets((rows, cols), elem_bytes, swizzle)
    span = swizzle or cols * elem_bytes
    per_box = span // elem_bytes
    seen = set()
    for r in range(rows):
        for c in range(cols):
            box, cc = divmod(c, per_box)
            byte = box * rows * span + r * span + cc * elem_bytes
            if swizzle:
                s_mask = swizzle // 16 - 1
                byte ^= ((byte >> 7) & s_mask) << 4
            assert m(flat(r, c, cols)) * elem_bytes == byte, (r, c)
            seen.add(byte)
    assert len(seen) == rows * cols  # a permutation of the buffer


def test_nvmma_transposed_is_contiguous_along_rows():
    m = nvmma_offsets((64, 32), 2, 128, transposed=True)
    # element (r, c) with r contiguous: 16-byte chunk (r // 8) ^ (c % 8)
    for r in range(64):
        for c in range(32):
            assert m(flat(r, c, 32)) == c * 64 + (((r >> 3) ^ (c & 7)) << 3) + (r & 7)


@pytest.mark.parametrize("vec,per_phase,max_phase", [(8, 1, 8), (8, 2, 4), (4, 1, 8), (1, 1, 1)])
def test_swizzled_matches_triton_formula(vec, per_phase, max_phase):
    rows, cols = 32, 64
    m = swizzled_offsets((rows, cols), vec, per_phase, max_phase)
    for r in range(rows):
        phase = (r // per_phase) % max_phase
        for c in range(cols):
            want = r * cols + ((c // vec) ^ phase) * vec + c % vec
            assert m(flat(r, c, cols)) == want


def test_bad_arguments():
    with pytest.raises(ValueError, match="swizzle"):
        nvmma_offsets((64, 64), 2, 96)
    with pytest.raises(ValueError, match="2-D"):
        swizzled_offsets((4, 4, 4), 1, 1, 1)
