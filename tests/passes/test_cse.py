"""CSE: duplicates merge across commutative operand orders and into nested regions,
never out of a region or across loads."""
from __future__ import annotations

from passes_test_utils import check


def test_commutative_operands_are_normalised():
    check("""
        kernel @k(%a: i32, %b: i32, %out: ptr<i32>) {
          %x = add %a, %b : i32
          %y = add %b, %a : i32
          %z = sub %a, %b : i32
          %w = sub %b, %a : i32
          %s = mul %x, %y : i32
          %t = mul %z, %w : i32
          store %out, %s {}
          store %out, %t {}
          return
        }""", "cse", """
        kernel @k(%a: i32, %b: i32, %out: ptr<i32>) {
          %x = add %a, %b : i32
          %z = sub %a, %b : i32
          %w = sub %b, %a : i32
          %s = mul %x, %x : i32
          %t = mul %z, %w : i32
          store %out, %s {}
          store %out, %t {}
          return
        }""")


def test_constants_merge_by_type_and_exact_value():
    check("""
        kernel @k(%out: ptr<f32>, %o2: ptr<i32>) {
          %a = constant {value = 0.0} : f32
          %b = constant {value = 0.0} : f32
          %c = constant {value = -0.0} : f32
          %d = constant {value = 0} : i32
          %e = constant {value = 0} : i32
          %f = constant {value = nan} : f32
          %g = constant {value = nan} : f32
          store %out, %a {}
          store %out, %b {}
          store %out, %c {}
          store %o2, %d {}
          store %o2, %e {}
          store %out, %f {}
          store %out, %g {}
          return
        }""", "cse", """
        kernel @k(%out: ptr<f32>, %o2: ptr<i32>) {
          %a = constant {value = 0.0} : f32
          %c = constant {value = -0.0} : f32
          %d = constant {value = 0} : i32
          %f = constant {value = nan} : f32
          store %out, %a {}
          store %out, %a {}
          store %out, %c {}
          store %o2, %d {}
          store %o2, %d {}
          store %out, %f {}
          store %out, %f {}
          return
        }""")


def test_attributes_distinguish_instructions():
    check("""
        kernel @k(%out: ptr<i32>) {
          %a = program_id {axis = 0} : i32
          %b = program_id {axis = 1} : i32
          %c = program_id {axis = 0} : i32
          %s = add %a, %b : i32
          %t = add %s, %c : i32
          store %out, %t {}
          return
        }""", "cse", """
        kernel @k(%out: ptr<i32>) {
          %a = program_id {axis = 0} : i32
          %b = program_id {axis = 1} : i32
          %s = add %a, %b : i32
          %t = add %s, %a : i32
          store %out, %t {}
          return
        }""")


def test_outer_value_is_reused_inside_regions_but_not_the_reverse():
    check("""
        kernel @k(%c: i1, %a: i32, %b: i32, %out: ptr<i32>) {
          %x = mul %a, %b : i32
          %r = if %c : i1 -> i32 {
            %y = mul %b, %a : i32
            %z = add %y, %a : i32
            yield %z
          } {
            %w = add %x, %a : i32
            yield %w
          }
          %v = add %x, %a : i32
          store %out, %r {}
          store %out, %v {}
          return
        }""", "cse", """
        kernel @k(%c: i1, %a: i32, %b: i32, %out: ptr<i32>) {
          %x = mul %a, %b : i32
          %r = if %c : i1 -> i32 {
            %z = add %x, %a : i32
            yield %z
          } {
            %w = add %x, %a : i32
            yield %w
          }
          %v = add %x, %a : i32
          store %out, %r {}
          store %out, %v {}
          return
        }""")


def test_loads_are_not_merged():
    text = """
        kernel @k(%p: ptr<f32>) {
          %a = load %p {} : f32
          store %p, %a {}
          %b = load %p {} : f32
          %s = add %a, %b : f32
          store %p, %s {}
          return
        }"""
    check(text, "cse", text)


def test_merging_cascades_through_operands():
    check("""
        kernel @k(%a: i32, %out: ptr<i32>) {
          %x = add %a, %a : i32
          %y = add %a, %a : i32
          %p = mul %x, %a : i32
          %q = mul %a, %y : i32
          %s = sub %p, %q : i32
          store %out, %s {}
          return
        }""", "cse", """
        kernel @k(%a: i32, %out: ptr<i32>) {
          %x = add %a, %a : i32
          %p = mul %x, %a : i32
          %s = sub %p, %p : i32
          store %out, %s {}
          return
        }""")
