"""What a tensor descriptor guarantees reaches the axis analysis of its pointer form:
`descriptors_to_pointers` attaches `known_multiple_of` hints (base 16 bytes, outer
strides 16 bytes) that raise, never lower, what the analysis found and speak for
their result only; so a block of a descriptor built from loaded values has 16-byte
rows. `bound_width` decides `index < bound` per run where the mask as a whole is
constant only per element."""
from __future__ import annotations

from passes_test_utils import by_name, parse

from tegula.ir.ops import Op
from tegula.passes import axis_info, bound_width, lower_descriptors, vector_width

KNOWN = """
    kernel @k(%p: ptr<f16>, %s: i64 {divisibility = 16}, %t: ptr<u64>) {
      %a = load %t : u64
      %b = int_to_ptr %a : ptr<f16>
      %hb = hint %b {kind = 'known_multiple_of', values = (16,)} : ptr<f16>
      %hs = hint %s {kind = 'known_multiple_of', values = (8,)} : i64
      %q = addptr %b, %s : ptr<f16>
      return
    }"""


def test_known_multiple_of_raises_for_its_result_and_never_lowers():
    k = parse(KNOWN)
    info = axis_info(k)
    assert info[by_name(k, "hb")].divisibility == (16,)
    assert info[by_name(k, "b")].divisibility == (1,)   # not in place: the fact holds at the descriptor
    assert info[by_name(k, "hs")].divisibility == (16,)  # the argument's 16 stays (a user multiple_of would set 8)


LOADED = """
    kernel @k(%t: ptr<u64>, %sz: ptr<i32>) {
      %a = load %t : u64
      %base = int_to_ptr %a : ptr<f16>
      %m = load %sz : i32
      %kk = load %sz : i32
      %ld = cast %kk : i64
      %one = constant {value = 1} : i64
      %d = make_tensor_descriptor %base, %m, %kk, %ld, %one : tensordesc<64x32xf16>
      %pid = program_id {axis = 0} : i32
      %c32 = constant {value = 32} : i32
      %k0 = mul %pid, %c32 : i32
      %z = constant {value = 0} : i32
      %v = descriptor_load %d, %z, %k0 : tile<64x32xf16>
      %o = int_to_ptr %a : ptr<f16>
      %os = splat %o : tile<64x32xptr<f16>>
      store %os, %v {}
      return
    }"""


def test_a_block_of_loaded_parts_has_16_byte_rows_and_a_bound_along_them():
    kernel = lower_descriptors(parse(LOADED))
    info = axis_info(kernel)
    load = next(i for i in kernel.walk() if i.op is Op.LOAD and i.attrs.has_mask)
    ptrs, mask = load.operands[0], load.operands[1]
    assert vector_width(ptrs, None, info) == 8       # 8 x f16 = 16 bytes per row run
    assert vector_width(ptrs, mask, info) == 1       # K unknown: the mask as a whole is per element
    below = [i for i in kernel.walk() if i.op is Op.LT and i.results[0].type.shape[-1] == 32]
    assert len(below) == 1
    index, bound = below[0].operands
    assert bound_width(index, bound, info) == 32     # the column index runs, K is uniform
