"""The verifier: valid kernels pass; each broken rule raises VerificationError whose
message names the problem and whose report marks the offending instruction."""
from __future__ import annotations

import textwrap

import pytest
from ir_test_kernels import build_all_ops_kernel, build_small_kernel

from tegula.ir import VerificationError, parse_ir, verify
from tegula.ir import attrs as A
from tegula.ir.core import Block, Instr, Loc, Value
from tegula.ir.ops import Kind, Op
from tegula.ir.types import I32
from tegula.ir.verifier import STAGE_OPS

HEAD = ("kernel @k(%x: ptr<f32>, %n: i32, %f: f32, %b: i1, %v: tile<128xf32>, "
        "%w: tile<64xf32>, %m: tile<128xi1>, %i: tile<128xi32>) {\n")


def kernel_of(body: str, ret: bool = True):
    return parse_ir(HEAD + textwrap.dedent(body) + ("return\n" if ret else "") + "}\n")


def fails(body: str, match: str, ret: bool = True) -> VerificationError:
    with pytest.raises(VerificationError, match=match) as info:
        verify(kernel_of(body, ret))
    return info.value


def test_valid_kernels_pass():
    verify(build_small_kernel())
    verify(build_all_ops_kernel(), stage="tgir")


def test_tgir_ops_are_rejected_before_the_backend_stage():
    with pytest.raises(VerificationError, match="'local_alloc' is not allowed at this stage"):
        verify(build_all_ops_kernel(), stage="tir")


def test_async_copy_checks_its_pointers_against_the_slot():
    k = kernel_of("%buf = local_alloc : smem<2x128xf16>\n%s = constant {value = 0} : i32\n"
                  "async_copy %buf, %s, %i {has_mask = False}\n")
    with pytest.raises(VerificationError, match="'async_copy' into smem<2x128xf16> takes pointers"):
        verify(k)
    verify(kernel_of("%0 = add %v, %v : tile<128xf32>\n"))


def test_local_copy_wants_two_buffers_of_one_slot_type():
    k = kernel_of("%a = local_alloc : smem<3x64x128xi8>\n%t = local_alloc : smem<2x64x128xf16>\n"
                  "%s = constant {value = 0} : i32\nlocal_copy %a, %s, %t, %s\n")
    with pytest.raises(VerificationError, match="'local_copy' takes two buffers of one slot shape and element"):
        verify(k)
    verify(kernel_of("%a = local_alloc : smem<3x64x128xi8>\n%t = local_alloc : smem<2x64x128xi8>\n"
                     "%s = constant {value = 0} : i32\nlocal_copy %a, %s, %t, %s\n"))


# ---------------------------------------------------------------- op table checks

def test_wrong_operand_count():
    fails("%0 = add %n, %n, %n : i32\n", r"'add' takes 2 operand\(s\), got 3")


def test_wrong_result_count():
    fails("%0, %1 = add %n, %n : i32, i32\n", r"'add' has 1 result\(s\), got 2")


def test_operand_type_mismatch():
    fails("%0 = add %n, %f : i32\n", r"operands of 'add' must have identical types, got \(i32, f32\)")


def test_operand_shape_mismatch():
    fails("%0 = add %v, %w : tile<128xf32>\n", r"operands of 'add' must have identical shapes")


def test_result_type_against_the_table_rule():
    fails("%0 = add %n, %n : f32\n", r"'add' should have result types \(i32\), got \(f32\)")


def test_comparison_must_produce_i1():
    fails("%0 = lt %n, %n : i32\n", r"comparison 'lt' must produce i1, got i32")


def test_op_not_defined_for_type_class():
    fails("%0 = exp %n : i32\n", r"'exp' is not defined for i32")


def test_select_condition_must_be_i1():
    fails("%0 = select %v, %v, %v : tile<128xf32>\n", r"'select' condition must be i1")


def test_addptr_needs_pointer_and_integer():
    fails("%0 = addptr %n, %n : i32\n", r"'addptr' takes a pointer and an integer offset")


def test_cast_keeps_shape():
    fails("%0 = cast %v {rounding = 'rtne'} : tile<64xf32>\n", r"'cast' must keep the shape")


def test_bitcast_needs_equal_widths():
    fails("%0 = bitcast %f : i64\n", r"'bitcast' needs equal bit widths")


def test_bad_attrs_class():
    fails("%0 = constant #AxisAttrs{axis = 1} : i32\n",
          r"'constant' needs attributes of class ConstantAttrs, got AxisAttrs")


def test_missing_attrs():
    k = kernel_of("%0 = program_id {axis = 0} : i32\n")
    k.body.instrs[0].attrs = None
    with pytest.raises(VerificationError, match=r"needs attributes of class AxisAttrs, got none"):
        verify(k)


def test_non_power_of_two_tile():
    fails("%0 = arange {start = 0, end = 3} : tile<3xi32>\n",
          r"tile<3xi32>: tile dimensions must be powers of two")


def test_non_power_of_two_kernel_argument():
    with pytest.raises(VerificationError, match=r"value %t has type tile<6xf32>: tile dimensions"):
        verify(parse_ir("kernel @k(%t: tile<6xf32>) {\n  return\n}"))


def test_load_mask_and_store_value():
    fails("%0 = splat %x : tile<128xptr<f32>>\n"
          "%1 = load %0, %i {has_mask = True, has_other = False, cache_modifier = '', "
          "eviction_policy = '', volatile = False} : tile<128xf32>\n", r"'load' mask must be i1")
    fails("%0 = splat %x : tile<128xptr<f32>>\n"
          "store %0, %i {has_mask = False, cache_modifier = '', eviction_policy = ''}\n",
          r"'store' value must have the pointee type f32")
    fails("%0 = splat %x : tile<128xptr<f32>>\n"
          "store %0, %v {has_mask = True, cache_modifier = '', eviction_policy = ''}\n",
          r"'store' with these attributes takes operands \(pointer, value, mask\), got 2")


def test_dot_shapes():
    fails("%0 = constant {value = 1.0} : tile<16x32xf16>\n"
          "%1 = constant {value = 0.0} : tile<16x16xf32>\n"
          "%2 = dot %0, %0, %1 {input_precision = 'ieee', max_num_imprecise_acc = None} : tile<16x16xf32>\n",
          r"'dot' shapes do not match")


def test_shape_ops():
    fails("%0 = broadcast %v {shape = (64,), can_reorder = False} : tile<64xf32>\n",
          r"cannot broadcast shape \(128,\) to \(64,\)")
    fails("%0 = reshape %v {shape = (64,), can_reorder = False} : tile<64xf32>\n",
          r"cannot reshape \(128,\) to \(64,\): element counts differ")
    fails("%0 = splat %v : tile<128xf32>\n", r"'splat' turns a scalar into a tile")


# ---------------------------------------------------------------- dominance

def test_use_before_definition():
    k = kernel_of("%0 = add %n, %n : i32\n%1 = mul %0, %0 : i32\n")
    k.body.instrs[0], k.body.instrs[1] = k.body.instrs[1], k.body.instrs[0]
    with pytest.raises(VerificationError, match=r"operand %\d+ of 'mul' is used before its definition"):
        verify(k)


def test_value_escaping_its_region():
    err = fails("""\
        %0 = constant {value = 0} : i32
        %1 = constant {value = 1} : i32
        for %0, %n, %1 : i32, i32, i32 {
        ^(%2: i32):
          %3 = add %2, %2 : i32
          yield
        }
        %4 = add %3, %3 : i32
        """, r"operand %3 of 'add' is defined inside a region and is not visible here")
    assert err.instr.op is Op.ADD


def test_region_op_results_not_visible_in_its_own_region():
    fails("""\
        %0 = if %b : i1 -> i32 {
          yield %0
        } {
          yield %n
        }
        """, r"operand %0 of 'yield' is used before its definition")


def test_value_not_defined_in_kernel():
    k = kernel_of("%0 = add %n, %n : i32\n")
    k.body.instrs[0].operands[1] = Value(I32)
    with pytest.raises(VerificationError, match=r"operand %ext.0 of 'add' is not defined in this kernel"):
        verify(k)


def test_value_defined_twice():
    k = kernel_of("%0 = add %n, %n : i32\n%1 = add %n, %n : i32\n")
    k.body.instrs[1].results[0] = k.body.instrs[0].results[0]
    with pytest.raises(VerificationError, match=r"value %0 is defined more than once"):
        verify(k)


# ---------------------------------------------------------------- terminators and regions

def test_missing_return():
    fails("%0 = add %n, %n : i32\n", r"the kernel body must end in 'return', but it ends in 'add'", ret=False)
    with pytest.raises(VerificationError, match=r"the kernel body must end in 'return', but it is empty"):
        verify(parse_ir("kernel @k() {\n}"))


def test_missing_region_terminator():
    fails("""\
        %0 = constant {value = 0} : i32
        for %0, %n, %n : i32, i32, i32 {
        ^(%1: i32):
          %2 = add %1, %1 : i32
        }
        """, r"a region of 'for' must end in 'yield', but it ends in 'add'")


def test_terminator_not_last():
    fails("""\
        if %b : i1 {
          yield
          debug_barrier
        } {
          yield
        }
        """, r"terminator 'yield' must be the last instruction of its block")


def test_for_yield_type_mismatch():
    err = fails("""\
        %0 = constant {value = 0} : i32
        %1 = for %0, %n, %n, %f : i32, i32, i32, f32 -> f32 {
        ^(%2: i32, %3: f32):
          yield %2
        }
        """, r"'yield' in a region of 'for' yields \(i32\), but the loop-carried values have types \(f32\)")
    assert err.instr.op is Op.YIELD


def test_for_body_arguments_and_bounds():
    fails("""\
        %0 = for %n, %n, %n, %f : i32, i32, i32, f32 -> f32 {
        ^(%2: i32):
          yield %f
        }
        """, r"the 'for' body \(iv, iters\) must take arguments \(i32, f32\), got \(i32\)")
    fails("""\
        for %f, %f, %f : f32, f32, f32 {
        ^(%2: f32):
          yield
        }
        """, r"'for' bounds and step must be scalars of one integer type")


def test_if_yield_type_mismatch():
    fails("""\
        %0 = if %b : i1 -> f32 {
          yield %f
        } {
          yield %n
        }
        """, r"'yield' in a region of 'if' yields \(i32\), but the results of 'if' have types \(f32\)")


def test_if_condition_must_be_scalar_i1():
    fails("""\
        if %n : i32 {
          yield
        } {
          yield
        }
        """, r"'if' condition must be a scalar i1, got i32")
    fails("""\
        if %m : tile<128xi1> {
          yield
        } {
          yield
        }
        """, r"'if' condition must be a scalar i1, got tile<128xi1>")


def test_while_rules():
    loop = """\
        %0 = while %n : i32 -> i32 {{
        ^(%1: i32):
          %2 = lt %1, %n : i1
          condition {cond}, %1
        }} {{
        ^(%3: i32):
          yield {after}
        }}
        """
    verify(kernel_of(loop.format(cond="%2", after="%3")))
    fails(loop.format(cond="%2", after="%f"),
          r"'yield' in a region of 'while' yields \(f32\), but the loop-carried values of 'while' have "
          r"types \(i32\)")
    fails(loop.format(cond="%1", after="%3"), r"'condition' must take a scalar i1 first operand")
    fails(loop.replace("^(%3: i32)", "^(%3: f32)").format(cond="%2", after="%n"),
          r"the 'after' region of 'while' must take arguments \(i32\), got \(f32\)")
    fails(loop.replace("^(%1: i32)", "^(%1: i64)").format(cond="%2", after="%3"),
          r"the 'before' region of 'while' must take arguments \(i32\), got \(i64\)")
    fails(loop.replace("condition {cond}, %1", "yield %1").format(after="%3"),
          r"a region of 'while' must end in 'condition', but it ends in 'yield'")


def test_reduce_region_arity():
    fails("""\
        %0 = reduce %v {axis = 0} : tile<128xf32> -> f32 {
        ^(%1: f32):
          yield %1
        }
        """, r"the combine region of 'reduce' must take arguments \(f32, f32\), got \(f32\)")


def test_reduce_yield_and_axis():
    fails("""\
        %0 = reduce %v {axis = 0} : tile<128xf32> -> f32 {
        ^(%1: f32, %2: f32):
          yield %1, %2
        }
        """, r"'yield' in a region of 'reduce' yields \(f32, f32\), but the scalar element types")
    fails("""\
        %0 = scan %v {axis = 1} : tile<128xf32> -> tile<128xf32> {
        ^(%1: f32, %2: f32):
          yield %1
        }
        """, r"'scan' axis 1 is out of range for rank 1")


def test_region_count():
    k = kernel_of("%0 = add %n, %n : i32\n")
    k.body.instrs[0].regions.append(Block())
    with pytest.raises(VerificationError, match=r"'add' has 0 region\(s\), got 1"):
        verify(k)


# ---------------------------------------------------------------- stages

def test_stage_hook(monkeypatch):
    with pytest.raises(ValueError, match="unknown IR stage 'nope'"):
        verify(build_small_kernel(), stage="nope")
    monkeypatch.setitem(STAGE_OPS, "no_control", frozenset(set(Op) - {Op.FOR}))
    verify(build_small_kernel(), stage="no_control")
    with pytest.raises(VerificationError, match=r"op 'for' is not allowed at this stage"):
        verify(build_all_ops_kernel(), stage="no_control")
    monkeypatch.setitem(STAGE_OPS, "kinds", frozenset({Kind.ELEMENTWISE, Kind.SOURCE, Op.RETURN}))
    verify(kernel_of("%0 = add %n, %n : i32\n"), stage="kinds")
    with pytest.raises(VerificationError, match=r"op 'splat' is not allowed"):
        verify(kernel_of("%0 = splat %n : tile<4xi32>\n"), stage="kinds")


# ---------------------------------------------------------------- the report

def test_report_marks_the_instruction_and_shows_the_source(tmp_path):
    src = tmp_path / "user_kernel.py"
    src.write_text("def k(x, n):\n    y = x + n\n    return y\n")
    k = kernel_of("%0 = add %n, %f : i32\n%1 = mul %n, %n : i32\n")
    k.body.instrs[0].loc = Loc(str(src), 2, 8, 13)
    with pytest.raises(VerificationError) as info:
        verify(k)
    err = info.value
    lines = str(err).splitlines()
    assert lines[0] == "IR verification failed: operands of 'add' must have identical types, got (i32, f32)"
    at = lines.index("  %0 = add %n, %f : i32")
    assert lines[at + 1].startswith("  ^^^^")
    assert lines[at + 1].endswith(" error: operands of 'add' must have identical types, got (i32, f32)")
    assert lines[at + 2] == "  %1 = mul %n, %n : i32"
    assert lines[-3].startswith(f"{src}:2:9: error: operands of 'add'")
    assert lines[-2] == "    y = x + n"
    assert lines[-1] == "        ^~~~~"
    assert err.message.startswith("operands of 'add'")
    assert isinstance(err.instr, Instr)


def test_report_without_location_ends_with_the_ir():
    err = fails("%0 = add %n, %f : i32\n", "identical types")
    assert str(err).splitlines()[-1] == "}"


def test_kernel_level_error_marks_the_header():
    k = parse_ir("kernel @k(%a: i32, %b: i32) {\n  return\n}")
    k.arg_names = ["a", "a"]
    with pytest.raises(VerificationError) as info:
        verify(k)
    lines = str(info.value).splitlines()
    assert "kernel argument name 'a' is used twice" in lines[0]
    assert lines[1].startswith("kernel @k(")
    assert lines[2].startswith("^^^") and "used twice" in lines[2]


def test_builder_made_kernel_with_wrong_attr_value_class():
    k = build_small_kernel()
    k.body.instrs[0].attrs = A.RangeAttrs(0, 4)
    with pytest.raises(VerificationError, match=r"'program_id' needs attributes of class AxisAttrs, got "
                                                 r"RangeAttrs"):
        verify(k)


def test_an_if_without_results_may_return_early():
    verify(kernel_of("""\
        if %b : i1 {
          return
        } {
          yield
        }
        """))
    fails("""\
        %r = if %b : i1 -> i32 {
          return
        } {
          yield %n
        }
        """, "must end in 'yield', but it ends in 'return'")


DESC_HEAD = "kernel @d(%x: ptr<f16>, %n: i32, %s: i64, %t: tile<16x16xf16>, %c: i1) {\n"


def desc_fails(body: str, match: str) -> None:
    with pytest.raises(VerificationError, match=match):
        verify(parse_ir(DESC_HEAD + textwrap.dedent(body) + "return\n}\n"))


def test_descriptor_ops_check_their_operands():
    make = "%d = make_tensor_descriptor %x, %n, %n, %s, %s : tensordesc<16x16xf16>\n"
    verify(parse_ir(DESC_HEAD + make + "%v = descriptor_load %d, %n, %n : tile<16x16xf16>\n"
                    "descriptor_store %d, %n, %n, %v\n"
                    "descriptor_reduce %d, %n, %n, %v {kind = 'add'}\nreturn\n}\n"))
    desc_fails("%d = make_tensor_descriptor %x, %n, %s, %s : tensordesc<16x16xf16>\n",
               r"takes \(base, shape..., strides...\)")
    desc_fails("%d = make_tensor_descriptor %x, %n, %n, %s, %s : tensordesc<16x16xf32>\n",
               r"takes \(base, shape..., strides...\) \(ptr<f32>")
    desc_fails(make + "%v = descriptor_load %d, %n : tile<16x16xf16>\n", "takes .descriptor, offsets...")
    desc_fails(make + "%v = descriptor_load %d, %n, %n : tile<16x8xf16>\n", "should have result types")
    desc_fails(make + "descriptor_store %d, %n, %n, %x\n", "offsets..., value")
    desc_fails(make + "descriptor_reduce %d, %n, %n, %t {kind = 'max'}\n", "kind 'max' is not defined for f16")
    desc_fails("%d = make_tensor_descriptor %x, %n, %n, %s, %s : tensordesc<16x12xf16>\n",
               "power-of-two dimensions")
    desc_fails("%d = make_tensor_descriptor %x, %n, %s, %s : tensordesc<16xi16, nan>\n", "padding is 'zero'")


def test_descriptors_are_not_carried_through_regions():
    desc_fails("""%d = make_tensor_descriptor %x, %n, %n, %s, %s : tensordesc<16x16xf16>
                  %e = if %c : i1 -> tensordesc<16x16xf16> {
                    yield %d
                  } {
                    yield %d
                  }
               """, "tensor descriptors are made by 'make_tensor_descriptor' only")
