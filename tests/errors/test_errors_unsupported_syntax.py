"""Each Python construct @jit functions do not support is reported at the construct,
naming it."""
# ruff: noqa: F841, B018  (the kernels below are never run as Python)
from __future__ import annotations

import pytest
from errors_test_utils import check, compile_error, jit

X = 1


@jit
def uses_break(n):
    for i in range(n):
        break  # E


@jit
def uses_continue(n):
    for i in range(n):
        continue  # E


@jit
def uses_lambda(n):
    f = lambda v: v + 1  # E


@jit
def uses_try(n):
    try:  # E
        n = n + 1
    except Exception:
        pass


@jit
def uses_with(n):
    with open("f") as f:  # E
        pass


@jit
def uses_del(n):
    m = n
    del m  # E


@jit
def uses_class(n):
    class Inner:  # E
        pass


@jit
def uses_def(n):
    def inner(v):  # E
        return v


@jit
def uses_async_def(n):
    async def inner(v):  # E
        return v


@jit
def uses_yield(n):
    yield n  # E


@jit
def uses_global(n):
    global X  # E


def _make_nonlocal_kernel():
    y = 0

    @jit
    def uses_nonlocal(n):
        nonlocal y  # E
        y = n

    return uses_nonlocal


uses_nonlocal = _make_nonlocal_kernel()


@jit
def uses_raise(n):
    raise ValueError("no")  # E


@jit
def uses_generator_expression(n):
    t = (i for i in (1, 2))  # E


@jit
def uses_walrus(n):
    if (m := n) > 0:  # E
        pass


@jit
def _callee(a, b):
    return a + b


@jit
def uses_double_star(n):
    return _callee(**n)  # E


@jit
def uses_starred_target(n):
    a, *b = (1, 2, 3)  # E


@jit
def uses_varargs(n, *rest):  # E
    pass


@jit
def uses_matmul(n):
    m = n @ n  # E


CASES = [
    (uses_break, "break", "'break' is not supported in @jit functions"),
    (uses_continue, "continue", "'continue' is not supported in @jit functions"),
    (uses_lambda, "lambda", "'lambda' is not supported in @jit functions"),
    (uses_try, "try", "'try' is not supported in @jit functions"),
    (uses_with, "with", "'with' is not supported in @jit functions"),
    (uses_del, "del", "'del' is not supported in @jit functions"),
    (uses_class, "class", "'class' definitions are not supported in @jit functions"),
    (uses_def, "def",
     "nested function definitions ('def' inside a @jit function) are not supported in @jit functions"),
    (uses_async_def, "async", "'async def' is not supported in @jit functions"),
    (uses_yield, "yield", "'yield' is not supported in @jit functions"),
    (uses_global, "global", "'global' is not supported in @jit functions"),
    (uses_nonlocal, "nonlocal", "'nonlocal' is not supported in @jit functions"),
    (uses_raise, "raise", "'raise' is not supported in @jit functions"),
    (uses_generator_expression, "(i for", "generator expressions are not supported in @jit functions"),
    (uses_walrus, "m :=", "assignment expressions (':=') are not supported in @jit functions"),
    (uses_double_star, "**n", "'**' argument unpacking is not supported in @jit functions"),
    (uses_starred_target, "a, *b",
     "starred assignment targets (`a, *b = ...`) are not supported in @jit functions"),
    (uses_matmul, "n @ n", "the '@' operator (use tl.dot) is not supported in @jit functions"),
]


@pytest.mark.parametrize("kernel, snippet, message", CASES, ids=[c[0].__name__ for c in CASES])
def test_unsupported_construct_is_located_and_named(kernel, snippet, message):
    err = compile_error(kernel)
    check(err, kernel, "# E", snippet, message)


def test_variadic_kernel_parameters_are_reported_at_the_def():
    err = compile_error(uses_varargs)
    check(err, uses_varargs, "# E", "def",
          "kernel 'uses_varargs' has a variadic parameter (*rest); variadic parameters are not "
          "supported in @jit functions")
