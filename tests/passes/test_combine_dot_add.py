"""combine_dot_add: `c + dot(a, b, 0)` (either order) becomes `dot(a, b, c)` when the
product has no other use and both are in one block, as Triton's combine pass does; the
interpreter's results stay the same for 16-bit and integer inputs."""
from __future__ import annotations

import numpy as np
from passes_test_utils import by_name, check, find, parse

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.interpreter import execute
from tegula.ir import parse_ir
from tegula.ir.ops import Op
from tegula.passes import PassContext, run_pipeline
from tegula.passes.combine_dot_add import combine_dot_add
from tegula.passes.pipelines import PIPELINES
from tegula.runtime.source import ASTSource

HEAD = """
    kernel @k(%a: tile<16x16xf16>, %b: tile<16x16xf16>, %c: tile<16x16xf32>, %p: tile<16x16xptr<f32>>) {
      %z0 = constant {value = 0.0} : f32
      %z = splat %z0 : tile<16x16xf32>
"""


def test_add_after_a_fresh_dot_becomes_its_accumulator():
    for add in ("add %d, %c", "add %c, %d"):
        check(HEAD + f"""
          %d = dot %a, %b, %z : tile<16x16xf32>
          %s = {add} : tile<16x16xf32>
          store %p, %s {{}}
          return
        }}""", "combine_dot_add", HEAD + """
          %s = dot %a, %b, %c : tile<16x16xf32>
          store %p, %s {}
          return
        }""")


def test_an_imprecise_fp8_accumulation_keeps_its_exact_add():
    text = HEAD + """
          %d = dot %a, %b, %z {max_num_imprecise_acc = 1073741824} : tile<16x16xf32>
          %s = add %d, %c : tile<16x16xf32>
          store %p, %s {}
          return
        }"""
    kernel = combine_dot_add(parse(text))
    assert len(find(kernel, Op.ADD)) == 1 and find(kernel, Op.DOT)[0].operands[2] is not by_name(kernel, "c")


def test_left_alone_when_the_product_is_used_again_or_the_accumulator_is_not_zero():
    for body in ("""
          %d = dot %a, %b, %z : tile<16x16xf32>
          %s = add %d, %c : tile<16x16xf32>
          %r = add %s, %d : tile<16x16xf32>
        """, """
          %d = dot %a, %b, %c : tile<16x16xf32>
          %r = add %d, %c : tile<16x16xf32>
        """):
        text = HEAD + body + "  store %p, %r {}\n  return\n}"
        kernel = combine_dot_add(parse(text))
        assert len(find(kernel, Op.ADD)) >= 1


@tegula.jit
def accumulate(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b, out_dtype=c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@tegula.jit
def product_outside_the_loop(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The product is computed once before the loop; the adds inside stay adds (moving
    the dot into the loop would repeat it)."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    d = tl.dot(tl.load(a_ptr + rm[:, None] * K + rk[None, :]), tl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += d
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def _ir(fn, elem, out, passes=None):
    """The kernel after tir_opt, or after `passes` run on the frontend's output."""
    sig = {"a_ptr": f"*{elem}", "b_ptr": f"*{elem}", "c_ptr": f"*{out}", "K": "i32", "BM": "constexpr",
           "BN": "constexpr", "BK": "constexpr"}
    ck = tegula.compile(ASTSource(fn, sig, {"BM": 16, "BN": 16, "BK": 32}), target=GPUTarget("cuda", 90, 32),
                        options={"num_warps": 4})
    if passes is None:
        return ck.ir
    return run_pipeline(parse_ir(ck.asm["tir"]), passes, PassContext(verify=True))


def test_tir_opt_folds_the_accumulation_of_a_loop():
    kernel = _ir(accumulate, "fp16", "fp32")
    loop = next(i for i in kernel.walk() if i.op is Op.FOR)
    dot = next(i for i in loop.regions[0].instrs if i.op is Op.DOT)
    assert dot.operands[2] is loop.regions[0].args[1]     # the loop-carried accumulator
    assert not [i for i in loop.regions[0].instrs if i.op is Op.ADD and dot.results[0] in i.operands]
    kept = _ir(product_outside_the_loop, "fp16", "fp32")
    inner = next(i for i in kept.walk() if i.op is Op.FOR).regions[0]
    assert [i for i in inner.instrs if i.op is Op.ADD] and not [i for i in inner.instrs if i.op is Op.DOT]


def test_interpreter_results_unchanged_for_16_bit_and_integer_inputs():
    rng = np.random.default_rng(3)
    K = 96
    for elem, out, np_in, np_out in (("fp16", "fp32", np.float16, np.float32), ("i8", "i32", np.int8, np.int32)):
        kernel = _ir(accumulate, elem, out)
        unfolded = _ir(accumulate, elem, out, [p for p in PIPELINES["tir_opt"] if p != "combine_dot_add"])
        assert len(find(kernel, Op.ADD)) < len(find(unfolded, Op.ADD))
        if np_in is np.int8:
            a, b = rng.integers(-128, 128, (16, K)).astype(np_in), rng.integers(-128, 128, (K, 16)).astype(np_in)
        else:
            a, b = rng.standard_normal((16, K)).astype(np_in), rng.standard_normal((K, 16)).astype(np_in)
        results = []
        for kern in (kernel, unfolded):
            c = np.zeros((16, 16), np_out)
            execute(kern, (1, 1, 1), [a, b, c, K])
            results.append(c)
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_array_equal(results[0], results[1])
        np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-3)
