"""written_arguments: pointer arguments reachable from a store's pointer."""
from __future__ import annotations

from passes_test_utils import parse

from tegula.passes import written_arguments


def test_load_only_arguments_are_excluded():
    k = parse("""
        kernel @k(%x: ptr<f32>, %y: ptr<f32>, %out: ptr<f32>, %n: i32) {
          %r = arange {start = 0, end = 8} : tile<8xi32>
          %xs = splat %x : tile<8xptr<f32>>
          %px = addptr %xs, %r : tile<8xptr<f32>>
          %a = load %px {} : tile<8xf32>
          %os = splat %out : tile<8xptr<f32>>
          %po = addptr %os, %r : tile<8xptr<f32>>
          store %po, %a {}
          return
        }""")
    assert written_arguments(k) == {"out"}


def test_store_through_loop_carried_pointer_and_select():
    k = parse("""
        kernel @k(%a: ptr<f32>, %b: ptr<f32>, %c: ptr<f32>, %flag: i1, %n: i32) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %one = constant {value = 1} : i32
          %v = load %c {} : f32
          %r = for %lb, %n, %st, %a : i32, i32, i32, ptr<f32> -> ptr<f32> {
          ^(%i: i32, %p: ptr<f32>):
            store %p, %v {}
            %q = addptr %p, %one : ptr<f32>
            yield %q
          }
          %s = select %flag, %r, %b : ptr<f32>
          store %s, %v {}
          return
        }""")
    assert written_arguments(k) == {"a", "b"}


def test_pointer_swapped_through_iteration_is_followed():
    k = parse("""
        kernel @k(%a: ptr<f32>, %b: ptr<f32>, %n: i32) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %v = load %a {} : f32
          %r, %s = for %lb, %n, %st, %a, %b : i32, i32, i32, ptr<f32>, ptr<f32> -> ptr<f32>, ptr<f32> {
          ^(%i: i32, %p: ptr<f32>, %q: ptr<f32>):
            yield %q, %p
          }
          store %r, %v {}
          return
        }""")
    assert written_arguments(k) == {"a", "b"}


def test_store_through_if_result():
    k = parse("""
        kernel @k(%a: ptr<f32>, %b: ptr<f32>, %c: ptr<f32>, %flag: i1) {
          %p = if %flag : i1 -> ptr<f32> {
            yield %a
          } {
            yield %a
          }
          %v = load %b {} : f32
          store %p, %v {}
          return
        }""")
    assert written_arguments(k) == {"a"}


def test_pointer_of_unknown_origin_means_every_pointer_argument():
    k = parse("""
        kernel @k(%pp: ptr<ptr<f32>>, %a: ptr<f32>, %n: i64) {
          %p = load %pp {} : ptr<f32>
          %v = load %a {} : f32
          store %p, %v {}
          return
        }""")
    assert written_arguments(k) == {"pp", "a"}
    k = parse("""
        kernel @k(%a: ptr<f32>, %b: ptr<f32>, %n: i64) {
          %p = int_to_ptr %n : ptr<f32>
          %v = load %a {} : f32
          store %p, %v {}
          return
        }""")
    assert written_arguments(k) == {"a", "b"}


def test_no_stores_no_written_arguments():
    k = parse("""
        kernel @k(%a: ptr<f32>) {
          %v = load %a {} : f32
          return
        }""")
    assert written_arguments(k) == set()


def test_read_arguments_follow_loads_and_atomics():
    from tegula.passes import read_arguments

    k = parse("""
        kernel @k(%x: ptr<f32>, %y: ptr<f32>, %out: ptr<f32>, %n: i32) {
          %a = load %x {} : f32
          store %out, %a {}
          return
        }""")
    assert read_arguments(k) == {"x"} and written_arguments(k) == {"out"}


def test_descriptor_store_writes_its_base_and_load_reads_it():
    from tegula.passes import read_arguments

    k = parse("""
        kernel @k(%x: ptr<f16>, %out: ptr<f16>, %n: i32, %s: i64) {
          %c0 = constant {value = 0} : i32
          %one = constant {value = 1} : i64
          %dx = make_tensor_descriptor %x, %n, %n, %s, %one : tensordesc<16x16xf16>
          %do = make_tensor_descriptor %out, %n, %n, %s, %one : tensordesc<16x16xf16>
          %t = descriptor_load %dx, %c0, %c0 : tile<16x16xf16>
          descriptor_store %do, %c0, %c0, %t
          return
        }""")
    assert written_arguments(k) == {"out"}
    assert read_arguments(k) == {"x", "out"}


def test_inline_asm_with_side_effects_reads_and_writes_its_pointer_operands():
    """`st.global` in the assembly writes through `%out`: the autotuner must snapshot it
    and torch.compile must see it mutated. Pure assembly accesses no memory."""
    from tegula.passes import read_arguments

    text = """
        kernel @k(%x: ptr<f32>, %out: ptr<f32>) {
          %v = load %x {} : f32
          %r = inline_asm_elementwise %out, %v {asm = 'st.global.f32 [$1], $2; mov.b32 $0, 0;', \
constraints = '=r,l,r', pack = 1, is_pure = PURE, outputs = ('i32',)} : i32
          return
        }"""
    k = parse(text.replace("PURE", "False"))
    assert written_arguments(k) == {"out"} and read_arguments(k) == {"x", "out"}
    k = parse(text.replace("PURE", "True"))
    assert written_arguments(k) == set() and read_arguments(k) == {"x"}
