"""pointer_table_arguments: the arguments whose values a kernel may use as addresses."""
from __future__ import annotations

from passes_test_utils import parse

from tegula.passes import pointer_table_arguments


def test_a_loaded_address_names_its_table():
    k = parse("""
        kernel @k(%table: ptr<i64>, %out: ptr<f32>) {
          %g = program_id {axis = 0} : i32
          %pt = addptr %table, %g : ptr<i64>
          %addr = load %pt {} : i64
          %p = int_to_ptr %addr : ptr<f32>
          %v = load %p {} : f32
          store %out, %v {}
          return
        }""")
    assert pointer_table_arguments(k) == {"table"}


def test_loaded_pointers_and_addresses_passed_as_numbers():
    k = parse("""
        kernel @k(%pp: ptr<ptr<f32>>, %addr: i64, %out: ptr<f32>, %flag: i1) {
          %p = load %pp {} : ptr<f32>
          %q = int_to_ptr %addr : ptr<f32>
          %r = select %flag, %p, %q : ptr<f32>
          %v = load %r {} : f32
          store %out, %v {}
          return
        }""")
    assert pointer_table_arguments(k) == {"pp", "addr"}


def test_an_address_carried_through_a_loop_is_followed():
    k = parse("""
        kernel @k(%t: ptr<i64>, %u: ptr<i64>, %out: ptr<f32>, %n: i32) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %a0 = load %t {} : i64
          %a = for %lb, %n, %st, %a0 : i32, i32, i32, i64 -> i64 {
          ^(%i: i32, %cur: i64):
            %nxt = load %u {} : i64
            yield %nxt
          }
          %p = int_to_ptr %a : ptr<f32>
          %v = load %p {} : f32
          store %out, %v {}
          return
        }""")
    assert pointer_table_arguments(k) == {"t", "u"}


def test_pointers_from_arguments_only_need_no_table():
    k = parse("""
        kernel @k(%a: ptr<f32>, %b: ptr<f32>, %flag: i1) {
          %p = select %flag, %a, %b : ptr<f32>
          %v = load %p {} : f32
          store %a, %v {}
          return
        }""")
    assert pointer_table_arguments(k) == set()


def test_an_address_computed_by_arithmetic_is_unknown():
    # the sum may fall in an array no table entry points into
    k = parse("""
        kernel @k(%table: ptr<i64>, %out: ptr<f32>) {
          %addr = load %table {} : i64
          %eight = constant {value = 8} : i64
          %moved = add %addr, %eight : i64
          %p = int_to_ptr %moved : ptr<f32>
          %v = load %p {} : f32
          store %out, %v {}
          return
        }""")
    assert pointer_table_arguments(k) is None


def test_a_table_behind_a_loaded_pointer_is_unknown():
    k = parse("""
        kernel @k(%pp: ptr<ptr<i64>>, %out: ptr<f32>) {
          %t = load %pp {} : ptr<i64>
          %addr = load %t {} : i64
          %p = int_to_ptr %addr : ptr<f32>
          %v = load %p {} : f32
          store %out, %v {}
          return
        }""")
    assert pointer_table_arguments(k) is None
