"""DCE: unused pure instructions, effect-free loops and ifs, unused loop-carried values
and if results, constant-condition ifs; effects stay."""
from __future__ import annotations

from passes_test_utils import check


def test_unused_pure_chain_and_unused_load_are_removed():
    check("""
        kernel @k(%p: ptr<f32>, %x: i32) {
          %a = add %x, %x : i32
          %b = mul %a, %x : i32
          %l = load %p {} : f32
          %c = constant {value = 1.0} : f32
          store %p, %c {}
          return
        }""", "dce", """
        kernel @k(%p: ptr<f32>, %x: i32) {
          %c = constant {value = 1.0} : f32
          store %p, %c {}
          return
        }""")


def test_side_effects_are_kept():
    text = """
        kernel @k(%p: ptr<f32>, %c: i1) {
          %l = load %p {volatile = True} : f32
          device_assert %c {message = 'boom'}
          device_print %c {prefix = 'c', hex = False}
          debug_barrier
          assume %c
          return
        }"""
    check(text, "dce", text)


def test_effect_free_for_and_if_with_unused_results_are_removed():
    check("""
        kernel @k(%n: i32, %c: i1, %x: f32, %p: ptr<f32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r = for %lb, %n, %st, %x : i32, i32, i32, f32 -> f32 {
          ^(%i: i32, %acc: f32):
            %a = add %acc, %acc : f32
            yield %a
          }
          %s = if %c : i1 -> f32 {
            %m = mul %x, %x : f32
            yield %m
          } {
            yield %x
          }
          return
        }""", "dce", """
        kernel @k(%n: i32, %c: i1, %x: f32, %p: ptr<f32>) {
          return
        }""")


def test_loop_with_store_is_kept_but_its_dead_iter_arg_goes():
    check("""
        kernel @k(%n: i32, %x: f32, %p: ptr<f32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %r, %s = for %lb, %n, %st, %x, %x : i32, i32, i32, f32, f32 -> f32, f32 {
          ^(%i: i32, %dead: f32, %live: f32):
            %a = add %dead, %dead : f32
            store %p, %live {}
            %b = mul %live, %live : f32
            yield %a, %b
          }
          return
        }""", "dce", """
        kernel @k(%n: i32, %x: f32, %p: ptr<f32>) {
          %lb = constant {value = 0} : i32
          %st = constant {value = 1} : i32
          %s = for %lb, %n, %st, %x : i32, i32, i32, f32 -> f32 {
          ^(%i: i32, %live: f32):
            store %p, %live {}
            %b = mul %live, %live : f32
            yield %b
          }
          return
        }""")


def test_unused_if_result_is_pruned_when_the_if_has_effects():
    check("""
        kernel @k(%c: i1, %x: f32, %p: ptr<f32>) {
          %r, %s = if %c : i1 -> f32, f32 {
            %a = add %x, %x : f32
            store %p, %x {}
            yield %a, %x
          } {
            yield %x, %x
          }
          store %p, %s {}
          return
        }""", "dce", """
        kernel @k(%c: i1, %x: f32, %p: ptr<f32>) {
          %s = if %c : i1 -> f32 {
            store %p, %x {}
            yield %x
          } {
            yield %x
          }
          store %p, %s {}
          return
        }""")


def test_while_loops_are_kept():
    text = """
        kernel @k(%x: i32) {
          %r = while %x : i32 -> i32 {
          ^(%a: i32):
            %c = lt %a, %a : i1
            condition %c, %a
          } {
          ^(%b: i32):
            yield %b
          }
          return
        }"""
    check(text, "dce", text)


def test_constant_if_dead_region_is_dropped():
    check("""
        kernel @k(%x: f32, %p: ptr<f32>) {
          %f = constant {value = False} : i1
          %r = if %f : i1 -> f32 {
            store %p, %x {}
            yield %x
          } {
            %a = add %x, %x : f32
            yield %a
          }
          store %p, %r {}
          return
        }""", "dce", """
        kernel @k(%x: f32, %p: ptr<f32>) {
          %a = add %x, %x : f32
          store %p, %a {}
          return
        }""")
