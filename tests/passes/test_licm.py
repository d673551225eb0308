"""LICM: invariant pure computations leave `for` loops (nested ones too); loads, stores,
loop-dependent values and instructions inside an `if` stay."""
from __future__ import annotations

from passes_test_utils import check


def test_invariant_arithmetic_is_hoisted_loads_and_stores_stay():
    check("""
        kernel @k(%n: i32, %s: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = for %lb, %n, %st, %s : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %acc: i32):
            %c = constant {value = 16} : i32
            %inv = mul %s, %c : i32
            %pid = program_id {axis = 0} : i32
            %l = load %p {} : i32
            %dep = add %acc, %inv : i32
            %dep2 = add %dep, %l : i32
            %iv2 = mul %i, %inv : i32
            store %p, %iv2 {}
            yield %dep2
          }
          store %p, %r {}
          return
        }""", "licm", """
        kernel @k(%n: i32, %s: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %c = constant {value = 16} : i32
          %inv = mul %s, %c : i32
          %pid = program_id {axis = 0} : i32
          %r = for %lb, %n, %st, %s : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %acc: i32):
            %l = load %p {} : i32
            %dep = add %acc, %inv : i32
            %dep2 = add %dep, %l : i32
            %iv2 = mul %i, %inv : i32
            store %p, %iv2 {}
            yield %dep2
          }
          store %p, %r {}
          return
        }""")


def test_hoisting_climbs_out_of_nested_loops():
    check("""
        kernel @k(%n: i32, %s: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = for %lb, %n, %st, %s : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %acc: i32):
            %q = for %lb, %n, %st, %acc : i32, i32, i32, i32 -> i32 {
            ^(%j: i32, %acc2: i32):
              %both = mul %s, %s : i32
              %outer = mul %i, %s : i32
              %t = add %acc2, %both : i32
              %u = add %t, %outer : i32
              yield %u
            }
            yield %q
          }
          store %p, %r {}
          return
        }""", "licm", """
        kernel @k(%n: i32, %s: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %both = mul %s, %s : i32
          %r = for %lb, %n, %st, %s : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %acc: i32):
            %outer = mul %i, %s : i32
            %q = for %lb, %n, %st, %acc : i32, i32, i32, i32 -> i32 {
            ^(%j: i32, %acc2: i32):
              %t = add %acc2, %both : i32
              %u = add %t, %outer : i32
              yield %u
            }
            yield %q
          }
          store %p, %r {}
          return
        }""")


def test_instructions_guarded_by_an_if_and_reductions_stay():
    text = """
        kernel @k(%n: i32, %c: i1, %s: i32, %v: tile<8xi32>, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = for %lb, %n, %st, %s : i32, i32, i32, i32 -> i32 {
          ^(%i: i32, %acc: i32):
            %g = if %c : i1 -> i32 {
              %d = idiv %s, %n : i32
              yield %d
            } {
              yield %s
            }
            %red = reduce %v {axis = 0} : tile<8xi32> -> i32 {
            ^(%a: i32, %b: i32):
              %m = add %a, %b : i32
              yield %m
            }
            %x = add %acc, %g : i32
            %y = add %x, %red : i32
            yield %y
          }
          store %p, %r {}
          return
        }"""
    check(text, "licm", text)


def test_a_loop_asking_for_no_licm_keeps_its_invariants():
    """`tl.range(..., disable_licm=True)`: nothing leaves that loop (as in Triton); a loop
    inside it still hoists into it."""
    text = """
        kernel @k(%n: i32, %s: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          for %lb, %n, %st {disable_licm = True} : i32, i32, i32 {
          ^(%i: i32):
            %c = constant {value = 16} : i32
            %inv = mul %s, %c : i32
            for %lb, %n, %st : i32, i32, i32 {
            ^(%j: i32):
              %inner = add %inv, %i : i32
              %at = add %inner, %j : i32
              store %p, %at {}
              yield
            }
            yield
          }
          return
        }"""
    check(text, "licm", """
        kernel @k(%n: i32, %s: i32, %p: ptr<i32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          for %lb, %n, %st {disable_licm = True} : i32, i32, i32 {
          ^(%i: i32):
            %c = constant {value = 16} : i32
            %inv = mul %s, %c : i32
            %inner = add %inv, %i : i32
            for %lb, %n, %st : i32, i32, i32 {
            ^(%j: i32):
              %at = add %inner, %j : i32
              store %p, %at {}
              yield
            }
            yield
          }
          return
        }""")
