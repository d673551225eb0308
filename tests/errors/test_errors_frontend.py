"""Located errors of the frontend and of the language layer as the frontend reports
them: each is at the user's `file:line:col`, with a precise message, the source line and
a caret, and without tegula-internal paths or chained internal exceptions."""
# ruff: noqa: F821, F841, E702  (the kernels below are compiled, never run as Python)
from __future__ import annotations

import inspect
import os

from errors_test_utils import TEGULA_DIR, check, compile_error, jit, where

import tegula.language as tl

NOT_CONSTEXPR = 128
BLOCK = tl.constexpr(16)


@jit
def bad_arange(n):
    x = tl.arange(0, 10)  # E


def test_non_power_of_two_arange():
    check(compile_error(bad_arange), bad_arange, "# E", "tl.arange", contains="power of 2")


@jit
def bad_shapes(n):
    x = tl.arange(0, 16) + tl.arange(0, 32)  # E


def test_shape_mismatch_names_both_shapes():
    err = compile_error(bad_shapes)
    check(err, bad_shapes, "# E", "tl.arange(0, 16) +", contains="(16,) and (32,)")


@jit
def undefined_name(n):
    x = n + y  # E


def test_undefined_name():
    check(compile_error(undefined_name), undefined_name, "# E", "y  #", "'y' is not defined")


@jit
def non_constexpr_global(n):
    x = tl.arange(0, NOT_CONSTEXPR)  # E


def test_non_constexpr_global():
    err = compile_error(non_constexpr_global)
    check(err, non_constexpr_global, "# E", "NOT_CONSTEXPR)",
          contains="Cannot access global variable NOT_CONSTEXPR from within @jit'ed function. Triton "
                   "kernels can only access global variables that are instantiated as constexpr")


def _make_closure_kernel():
    captured = [1, 2]

    @jit
    def closure_kernel(n):
        x = n + len(captured)  # E

    return closure_kernel


closure_kernel = _make_closure_kernel()


def test_non_constexpr_closure_variable():
    err = compile_error(closure_kernel)
    check(err, closure_kernel, "# E", "captured", contains="Cannot access variable 'captured' (a list)")


@jit
def python_builtin(n):
    x = abs(n)  # E


def test_unsupported_python_builtin_suggests_the_tl_function():
    err = compile_error(python_builtin)
    check(err, python_builtin, "# E", "abs",
          "the Python builtin 'abs' is not supported in @jit functions; use tl.abs(x) or x.abs()")


@jit
def _two_args(a, b):
    return a + b


@jit
def wrong_arguments(n):
    x = _two_args(n, 2, c=1)  # E


def test_wrong_arguments_to_a_jit_function():
    err = compile_error(wrong_arguments)
    check(err, wrong_arguments, "# E", "_two_args(",
          "wrong arguments in the call to @jit function '_two_args': got an unexpected keyword "
          "argument 'c'")


@jit
def if_type_mismatch(n):
    x = 0
    if n > 0:  # E
        x = 1.5


def test_if_branches_give_a_variable_different_types():
    err = compile_error(if_type_mismatch)
    check(err, if_type_mismatch, "# E", "if",
          "Mismatched type for x: f32 in the then-branch but i32 before the `if` (unchanged by the "
          "else-branch); a variable assigned under a tensor condition must have the same type on both paths")


@jit
def if_new_variable_mismatch(n):
    if n > 0:  # E
        y = tl.arange(0, 4)
    else:
        y = 2


def test_variable_defined_in_both_branches_with_different_types():
    err = compile_error(if_new_variable_mismatch)
    check(err, if_new_variable_mismatch, "# E", "if",
          "Mismatched type for y: tile<4xi32> in the then-branch but i32 in the else-branch; a variable "
          "assigned under a tensor condition must have the same type on both paths")


@jit
def defined_in_one_branch(n):
    if n > 0:
        t = n
    x = t  # E


def test_name_defined_in_one_branch_is_not_visible_after_the_if():
    err = compile_error(defined_in_one_branch)
    line = where(defined_in_one_branch, "if n > 0", "if").split(":")[-2]
    check(err, defined_in_one_branch, "# E", "t  #",
          f"'t' is not defined (it is only assigned in the then-branch of the `if` at line {line}, so it "
          "is not defined after it)")


@jit
def loop_type_change(n):
    acc = 0
    for i in range(n):
        acc = acc + 0.5  # E


def test_loop_carried_variable_changing_type():
    err = compile_error(loop_type_change)
    check(err, loop_type_change, "# E", "acc =",
          "loop-carried variable 'acc' is i32 before the loop but f32 at the end of the loop body; its "
          "type must stay the same across iterations")


@jit
def loop_local_used_after(n):
    for i in range(n):
        t = i * 2
    x = t  # E


def test_name_first_defined_in_a_loop_is_not_visible_after_it():
    err = compile_error(loop_local_used_after)
    line = where(loop_local_used_after, "for i in", "for").split(":")[-2]
    check(err, loop_local_used_after, "# E", "t  #",
          f"'t' is not defined (it is first assigned inside the loop at line {line}, so it is not "
          "defined after the loop)")


@jit
def while_changes_dtype_var(n):
    d = tl.float32
    while n > 0:
        d = tl.float16  # E
        n = n - 1


def test_loop_cannot_change_a_compile_time_value():
    err = compile_error(while_changes_dtype_var)
    check(err, while_changes_dtype_var, "# E", "d =",
          "'d' is dtype fp32 before the loop and is reassigned inside it (dtype fp16); only tensors and "
          "numbers can change inside a loop")


@jit
def return_in_loop(n):
    for i in range(n):
        if i > 3:
            return  # E


def test_return_inside_a_loop():
    err = compile_error(return_in_loop)
    check(err, return_in_loop, "# E", "return", "'return' inside a loop is not supported in @jit functions")


@jit
def kernel_returns_value(n):
    return n + 1  # E


def test_kernel_returning_a_value():
    err = compile_error(kernel_returns_value)
    check(err, kernel_returns_value, "# E", "return",
          "kernel 'kernel_returns_value' returns a value; kernels cannot return values (store results "
          "through a pointer)")


@jit
def _name_on_one_path(x):
    if x > 0:  # E
        return "name"


@jit
def undefinable_return(n):
    y = _name_on_one_path(n)


def test_a_string_returned_on_some_paths_only():
    # a tensor returned on some paths only is fine (tests/frontend/test_frontend_returns.py)
    err = compile_error(undefinable_return)
    check(err, _name_on_one_path, "# E", "if",
          "'_name_on_one_path' returns constexpr str ('name') on some paths and nothing on others; only "
          "tensors, numbers and tuples of them can be left undefined")


@jit
def iterate_tensor(n):
    for i in tl.arange(0, 4):  # E
        pass


def test_for_loop_over_something_else_than_a_range():
    err = compile_error(iterate_tensor)
    check(err, iterate_tensor, "# E", "for",
          "a for loop in a @jit function must iterate over range(...), tl.range(...) or "
          "tl.static_range(...), not builtin tl.arange")


@jit
def _recursive(n):
    return _recursive(n - 1)  # E


@jit
def calls_recursive(n):
    y = _recursive(n)


def test_recursion_is_reported_with_the_call_chain():
    err = compile_error(calls_recursive)
    check(err, _recursive, "# E", "_recursive(n - 1)",
          "recursive call of @jit function '_recursive' (calls_recursive -> _recursive -> _recursive); "
          "@jit functions are inlined, so they cannot be recursive")


# -------------------------------------------------------------------- errors inside callees

@jit
def _inner_bad(x):
    return x + tl.arange(0, 3)  # E-inner


@jit
def _middle(x):
    return _inner_bad(x) * 2  # E-middle


@jit
def outer(n):
    y = _middle(n)  # E-outer


def test_error_in_a_nested_callee_carries_the_call_chain():
    err = compile_error(outer)
    check(err, _inner_bad, "# E-inner", "tl.arange", contains="power of 2")
    assert [f"{s.loc}" for s in err.call_chain] == [
        where(outer, "# E-outer", "_middle("), where(_middle, "# E-middle", "_inner_bad(")]
    assert [s.callee for s in err.call_chain] == ["_middle", "_inner_bad"]
    text = str(err)
    # The call sites are shown innermost first, each with its source line.
    notes = [line for line in text.splitlines() if ": note: " in line]
    assert notes == [
        f"{where(_middle, '# E-middle', '_inner_bad(')}: note: in the call to '_inner_bad' from here",
        f"{where(outer, '# E-outer', '_middle(')}: note: in the call to '_middle' from here"]


@jit
def _bad_combine(a, b):
    return a + tl.arange(0, 3)  # E


@jit
def reduce_with_bad_combine(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 8))
    tl.store(x_ptr, tl.reduce(x, 0, _bad_combine))  # E-call


def test_error_in_a_combine_fn_points_into_it_with_the_reduce_call_site():
    err = compile_error(reduce_with_bad_combine, {"x_ptr": "*fp32"})
    check(err, _bad_combine, "# E", "tl.arange", contains="power of 2")
    assert [f"{s.loc}" for s in err.call_chain] == [where(reduce_with_bad_combine, "# E-call", "tl.reduce")]


# -------------------------------------------------------------------- rendering and tracebacks

@jit
def unicode_line(n):
    s = "déjà vu"; x = tl.arange(0, 5)  # E


def test_columns_count_characters_on_non_ascii_lines():
    check(compile_error(unicode_line), unicode_line, "# E", "tl.arange", contains="power of 2")


class Holder:
    @jit
    def indented_kernel(n):
        x = tl.arange(0, 6)  # E


def test_location_inside_an_indented_definition():
    kernel = Holder.__dict__["indented_kernel"]
    check(compile_error(kernel), kernel, "# E", "tl.arange", contains="power of 2")


def test_caret_underlines_the_span():
    text = str(compile_error(bad_arange))
    source, caret = text.splitlines()[1:3]
    start = source.index("tl.arange")
    assert caret == " " * start + "^" + "~" * (len("tl.arange(0, 10)") - 1)


def test_traceback_shows_no_frontend_internals():
    err = compile_error(bad_shapes)
    frames = [f.filename for f in inspect.getinnerframes(err.__traceback__)]
    internal = [f for f in frames if f.startswith(TEGULA_DIR + os.sep)]
    # Only the entry point's own frame (where the error is re-raised) remains.
    assert all(f.endswith(os.path.join("frontend", "kernel.py")) for f in internal), internal


def test_debug_frontend_keeps_the_internal_cause(monkeypatch):
    monkeypatch.setenv("TEGULA_DEBUG_FRONTEND", "1")
    err = compile_error(bad_shapes)
    assert err.__cause__ is not None
    assert where(bad_shapes, "# E", "tl.arange(0, 16) +") in str(err)
