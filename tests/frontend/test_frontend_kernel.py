"""The entry point's contract: kernel name and arguments, argument types and
attributes, constexpr binding and defaults, and the source location of every
instruction (file line offsets, dedented definitions, inlined callees)."""
from __future__ import annotations

import inspect

import pytest
from frontend_test_utils import build, compile_ir, jit, line_of

import tegula.language as tl
from tegula.errors import CompilationError
from tegula.frontend import build_kernel
from tegula.ir import ArgAttrs
from tegula.ir.core import UNKNOWN_LOC
from tegula.ir.types import F32, I32, I64, PointerType


@jit
def args_kernel(x_ptr, pp, n, one, BLOCK: tl.constexpr, OPT: tl.constexpr = 7):
    tl.store(x_ptr + tl.arange(0, BLOCK), n + one + OPT)


def test_arguments_are_the_non_constexpr_parameters_in_order():
    kernel = build_kernel(
        args_kernel,
        {"x_ptr": "*fp32", "pp": "**fp32", "n": "i64", "one": "i32", "BLOCK": "constexpr",
         "OPT": "constexpr"},
        {"BLOCK": 4, "one": 1},
        {"x_ptr": ArgAttrs(divisibility=16)},
        type("O", (), {"debug": False})())
    assert kernel.name == "args_kernel"
    assert kernel.arg_names == ["x_ptr", "pp", "n"]
    assert [a.type for a in kernel.args] == [PointerType(F32), PointerType(PointerType(F32)), I64]
    assert [a.divisibility for a in kernel.arg_attrs] == [16, 1, 1]


def test_unknown_argument_type_is_reported_at_the_def():
    with pytest.raises(CompilationError) as info:
        build(args_kernel, {"x_ptr": "*fp33", "pp": "i32", "n": "i32", "one": "i32"}, {"BLOCK": 4})
    assert str(info.value).startswith(
        f"{inspect.getsourcefile(args_kernel.fn)}:{line_of(args_kernel, 'def args_kernel')}:1: error: "
        "parameter 'x_ptr' of kernel 'args_kernel': unsupported argument type '*fp33'")


@jit
def loc_callee(v):
    return v * 2  # callee-line


@jit
def loc_kernel(x_ptr, n):
    y = loc_callee(n)  # call-line
    tl.store(x_ptr, y)  # store-line


def test_every_instruction_carries_the_location_of_its_node():
    kernel = build(loc_kernel, {"x_ptr": "*i32", "n": "i32"})
    file = inspect.getsourcefile(loc_kernel.fn)
    locs = {ins.op.value: ins.loc for ins in kernel.walk()}
    assert all(ins.loc != UNKNOWN_LOC for ins in kernel.walk())
    mul, store = locs["mul"], locs["store"]
    assert (mul.file, mul.line) == (file, line_of(loc_callee, "# callee-line"))
    assert mul.col == inspect.getsource(loc_callee.fn).splitlines()[2].index("v * 2")
    assert mul.end_col == mul.col + len("v * 2")
    assert (store.file, store.line, store.col) == (file, line_of(loc_kernel, "# store-line"), 4)
    assert kernel.loc.line == line_of(loc_kernel, "def loc_kernel")


def _make_nested():
    @jit
    def nested_kernel(x_ptr):
            tl.store(x_ptr, 1)  # deeper than usual on purpose

    return nested_kernel


def test_locations_of_a_nested_definition_are_in_file_columns():
    kernel = _make_nested()
    ir = build(kernel, {"x_ptr": "*i32"})
    store = [i for i in ir.walk() if i.op.value == "store"][0]
    assert store.loc.line == line_of(kernel, "deeper than usual")
    assert store.loc.col == 12


@jit
def annotated_locals(x_ptr):
    N: tl.constexpr = 4
    M = tl.constexpr(2 * N)
    label = f"n={N}"
    tl.static_assert(M == 8, label)
    tl.store(x_ptr + tl.arange(0, M), tl.arange(0, N * 2))


def test_constexpr_locals_stay_compile_time():
    # An unannotated `N = 4` would be a tensor (as in Triton) and tl.arange would reject it.
    ir = compile_ir(annotated_locals, {"x_ptr": "*i32"})
    assert "arange {start = 0, end = 8}" in ir


@jit
def annotated_tensor(x_ptr, n, TILE: tl.constexpr):
    SPAN: tl.constexpr = TILE * n  # a runtime value: Triton binds it (FlagGems' sort)
    start = SPAN * tl.program_id(0)
    tl.store(x_ptr + start + tl.arange(0, TILE), start)


@jit
def annotated_tensor_as_shape(x_ptr, n):
    SPAN: tl.constexpr = n * 2
    tl.store(x_ptr + tl.arange(0, SPAN), 1)


def test_constexpr_annotation_of_a_tensor_binds_the_tensor():
    ir = compile_ir(annotated_tensor, {"x_ptr": "*i32", "n": "i32"}, {"TILE": 4})
    assert "mul %0, %n : i32" in ir and "program_id" in ir
    # where a compile-time value is needed, the error is at the use
    with pytest.raises(CompilationError) as info:
        build(annotated_tensor_as_shape, {"x_ptr": "*i32", "n": "i32"})
    assert info.value.loc.line == line_of(annotated_tensor_as_shape, "tl.arange(0, SPAN)")


def test_dead_code_after_return_is_not_generated():
    ir = compile_ir(dead_code, {"x_ptr": "*i32"}, {"EARLY": True})
    assert "store" not in ir
    ir = compile_ir(dead_code, {"x_ptr": "*i32"}, {"EARLY": False})
    assert ir.count("store") == 1


@jit
def dead_code(x_ptr, EARLY: tl.constexpr):
    if EARLY:
        return
        tl.store(x_ptr, 1)
    tl.store(x_ptr, 2)


@jit
def loops_with_hints(x_ptr, n):
    i = 0
    total = 0
    for j in tl.range(0, n, 1, num_stages=3, loop_unroll_factor=2, flatten=True):
        total += j
    while tl.condition(i < n, disable_licm=True):
        i += 1
    tl.store(x_ptr, total + i)


def test_loop_hints_are_accepted():
    ir = compile_ir(loops_with_hints, {"x_ptr": "*i32", "n": "i32"})
    assert " for " in ir and " while " in ir


@jit
def wide_loop(x_ptr, n):
    acc = 0
    for i in range(0, n):
        acc += 1
    tl.store(x_ptr, acc)


def test_induction_variable_is_i64_when_a_bound_is():
    k32 = build(wide_loop, {"x_ptr": "*i32", "n": "i32"})
    k64 = build(wide_loop, {"x_ptr": "*i32", "n": "i64"})
    (loop32,) = [i for i in k32.walk() if i.op.value == "for"]
    (loop64,) = [i for i in k64.walk() if i.op.value == "for"]
    assert loop32.regions[0].args[0].type == I32
    assert loop64.regions[0].args[0].type == I64


@jit
def _pair(a, b):
    return a, b


@jit
def tuples_through_control_flow(x_ptr, n):
    t = _pair(0, 1.0)
    for i in range(n):
        t = (t[0] + i, t[1] * 2.0)
    if n > 3:
        t = (t[0] - 1, t[1])
    u = t if n > 5 else (t[0], t[1] + 1.0)
    tl.store(x_ptr, u[0] + u[1])


def test_tuples_are_carried_through_loops_ifs_and_ternaries():
    ir = compile_ir(tuples_through_control_flow, {"x_ptr": "*fp32", "n": "i32"})
    assert "-> i32, f32 {" in ir
    assert ir.count("-> i32, f32 {") == 3


@jit
def printing(x_ptr, n):
    print("value", n)
    tl.device_print("n", n)


def test_print_is_device_print():
    ir = compile_ir(printing, {"x_ptr": "*i32", "n": "i32"})
    assert ir.count("device_print") == 2


@jit
def comprehension(x_ptr, n):
    parts = [n * k for k in (1, 2, 3)]
    tl.store(x_ptr, parts[0] + parts[1] + parts[2])


def test_list_comprehension_over_a_tuple_unrolls():
    ir = compile_ir(comprehension, {"x_ptr": "*i32", "n": "i32"})
    assert ir.count("mul %n") == 3


@jit
def introspection(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 8)[:, None] * 4 + tl.arange(0, 4)[None, :])
    rows: tl.constexpr = x.shape[0]
    rank: tl.constexpr = len(x.shape)
    bits: tl.constexpr = x_ptr.dtype.element_ty.primitive_bitwidth
    is_tensor: tl.constexpr = isinstance(x, tl.tensor)
    name: tl.constexpr = getattr(x.dtype, "name")
    scale: tl.constexpr = float(int(rows * 2.5)) / 4
    tl.static_assert(rows == 8 and rank == 2 and bits == 32 and is_tensor and name == "fp32")
    tl.store(y_ptr + tl.arange(0, rows), tl.sum(x, axis=1) * scale)


def test_attributes_and_python_builtins_on_compile_time_values():
    ir = compile_ir(introspection, {"x_ptr": "*fp32", "y_ptr": "*fp32"})
    assert "constant {value = 5.0} : f32" in ir
