"""Translation validation: every kernel of a small corpus computes bit-identical
outputs on the reference interpreter before and after each pass and the whole
`tir_opt` pipeline (inputs include NaN, -0.0 and infinities)."""
from __future__ import annotations

import numpy as np
import pytest

interpreter = pytest.importorskip("tegula.backends.interpreter")

from tegula.ir import parse_ir, print_ir  # noqa: E402
from tegula.ir.types import PointerType  # noqa: E402
from tegula.ir.verifier import verify  # noqa: E402
from tegula.passes import PassContext, run_pipeline  # noqa: E402

CORPUS = {
    "masked_vector_op": """
kernel @k(%x: ptr<f32> {divisibility = 16}, %out: ptr<f32>, %n: i32) {
  %pid = program_id {axis = 0} : i32
  %b = constant {value = 8} : i32
  %s = mul %pid, %b : i32
  %ss = splat %s : tile<8xi32>
  %r = arange {start = 0, end = 8} : tile<8xi32>
  %o = add %ss, %r : tile<8xi32>
  %ns = splat %n : tile<8xi32>
  %m = lt %o, %ns : tile<8xi1>
  %xs = splat %x : tile<8xptr<f32>>
  %px = addptr %xs, %o : tile<8xptr<f32>>
  %v = load %px, %m {has_mask = True} : tile<8xf32>
  %zero = constant {value = 0.0} : tile<8xf32>
  %nzero = constant {value = -0.0} : tile<8xf32>
  %one = constant {value = 1.0} : tile<8xf32>
  %a = add %v, %zero : tile<8xf32>
  %b2 = add %a, %nzero : tile<8xf32>
  %c = mul %b2, %one : tile<8xf32>
  %d = sub %c, %c : tile<8xf32>
  %e = add %c, %d : tile<8xf32>
  %os = splat %out : tile<8xptr<f32>>
  %po = addptr %os, %o : tile<8xptr<f32>>
  store %po, %e, %m {has_mask = True}
  return
}""",
    "loop_with_invariants": """
kernel @k(%x: ptr<i32>, %out: ptr<i32>, %n: i32, %k: i32) {
  %pid = program_id {axis = 0} : i32
  %lb = constant {value = 0} : i32
  %st = constant {value = 1} : i32
  %r = arange {start = 0, end = 4} : tile<4xi32>
  %init = constant {value = 0} : tile<4xi32>
  %acc, %dead = for %lb, %n, %st, %init, %k : i32, i32, i32, tile<4xi32>, i32 -> tile<4xi32>, i32 {
  ^(%i: i32, %a: tile<4xi32>, %d: i32):
    %two = constant {value = 2} : i32
    %three = constant {value = 3} : i32
    %six = mul %two, %three : i32
    %ks = mul %k, %six : i32
    %ks2 = mul %six, %k : i32
    %kt = splat %ks : tile<4xi32>
    %kt2 = splat %ks2 : tile<4xi32>
    %is = splat %i : tile<4xi32>
    %four = constant {value = 4} : tile<4xi32>
    %row = mul %is, %four : tile<4xi32>
    %off = add %row, %r : tile<4xi32>
    %xs = splat %x : tile<4xptr<i32>>
    %px = addptr %xs, %off : tile<4xptr<i32>>
    %v = load %px {} : tile<4xi32>
    %w = add %v, %kt : tile<4xi32>
    %w2 = sub %w, %kt2 : tile<4xi32>
    %z = constant {value = 0} : tile<4xi32>
    %w3 = add %w2, %z : tile<4xi32>
    %na = add %a, %w3 : tile<4xi32>
    %nd = add %d, %d : i32
    yield %na, %nd
  }
  %os = splat %out : tile<4xptr<i32>>
  %po = addptr %os, %r : tile<4xptr<i32>>
  store %po, %acc {}
  return
}""",
    "branches": """
kernel @k(%x: ptr<f32>, %out: ptr<f32>, %flag: i32) {
  %t = constant {value = True} : i1
  %c0 = constant {value = 0} : i32
  %f = ne %flag, %c0 : i1
  %v = load %x {} : f32
  %a = if %t : i1 -> f32 {
    %y = mul %v, %v : f32
    yield %y
  } {
    yield %v
  }
  %b = if %f : i1 -> f32 {
    %y2 = mul %v, %v : f32
    %y3 = add %y2, %a : f32
    yield %y3
  } {
    %z = neg %v : f32
    %zz = neg %z : f32
    yield %zz
  }
  %n1 = constant {value = 1} : i32
  %p1 = addptr %out, %n1 : ptr<f32>
  store %out, %a {}
  store %p1, %b {}
  return
}""",
    "tile_2d_reduce": """
kernel @k(%a: ptr<f32> {divisibility = 16}, %out: ptr<f32>, %stride: i32) {
  %rm = arange {start = 0, end = 4} : tile<4xi32>
  %rn = arange {start = 0, end = 8} : tile<8xi32>
  %om = expand_dims %rm {axis = 1} : tile<4x1xi32>
  %ss = splat %stride : tile<4x1xi32>
  %rows = mul %om, %ss : tile<4x1xi32>
  %on = expand_dims %rn {axis = 0} : tile<1x8xi32>
  %rowsb = broadcast %rows {shape = (4, 8)} : tile<4x8xi32>
  %onb = broadcast %on {shape = (4, 8)} : tile<4x8xi32>
  %offs = add %rowsb, %onb : tile<4x8xi32>
  %as = splat %a : tile<4x8xptr<f32>>
  %ptrs = addptr %as, %offs : tile<4x8xptr<f32>>
  %v = load %ptrs {} : tile<4x8xf32>
  %t = permute %v {order = (1, 0)} : tile<8x4xf32>
  %tt = permute %t {order = (1, 0)} : tile<4x8xf32>
  %red = reduce %tt {axis = 1} : tile<4x8xf32> -> tile<4xf32> {
  ^(%p: f32, %q: f32):
    %s = add %p, %q : f32
    yield %s
  }
  %os = splat %out : tile<4xptr<f32>>
  %po = addptr %os, %rm : tile<4xptr<f32>>
  store %po, %red {}
  return
}""",
    "zero_trip_and_pointer_loop": """
kernel @k(%x: ptr<f32>, %out: ptr<f32>, %n: i32) {
  %lb = constant {value = 5} : i32
  %ub = constant {value = 2} : i32
  %st = constant {value = 1} : i32
  %v0 = load %x {} : f32
  %r = for %lb, %ub, %st, %v0 : i32, i32, i32, f32 -> f32 {
  ^(%i: i32, %acc: f32):
    %y = add %acc, %acc : f32
    yield %y
  }
  %zero = constant {value = 0} : i32
  %one = constant {value = 1} : i32
  %p, %q = for %zero, %n, %one, %out, %x : i32, i32, i32, ptr<f32>, ptr<f32> -> ptr<f32>, ptr<f32> {
  ^(%j: i32, %po: ptr<f32>, %px: ptr<f32>):
    %w = load %px {} : f32
    %w2 = add %w, %r : f32
    store %po, %w2 {}
    %npo = addptr %po, %one : ptr<f32>
    %npx = addptr %px, %one : ptr<f32>
    yield %npo, %npx
  }
  return
}""",
}

SCALARS = {"n": 6, "k": 3, "flag": 1, "stride": 8}
SPECIALS = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.25, 3e38], dtype=np.float32)


def _inputs(kernel, seed):
    rng = np.random.default_rng(seed)
    args = []
    for v in kernel.args:
        if isinstance(v.type, PointerType):
            dt = np.float32 if v.type.pointee.is_float else np.int32
            if dt is np.float32:
                data = rng.standard_normal(64).astype(np.float32)
                data[rng.integers(0, 64, 8)] = SPECIALS
            else:
                data = rng.integers(-1000, 1000, 64).astype(np.int32)
            args.append(data)
        else:
            args.append(SCALARS[v.name])
    return args


def _run(kernel, args, grid=(3, 1, 1)):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interpreter.execute(kernel, grid, args)
    return [a for a in args if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("passes", [["canonicalize"], ["cse"], ["dce"], ["licm"], "tir_opt"],
                         ids=["canonicalize", "cse", "dce", "licm", "tir_opt"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_pass_preserves_results(name, passes):
    text = CORPUS[name].strip()
    original = parse_ir(text)
    verify(original)
    optimized = run_pipeline(parse_ir(text), passes, PassContext(verify=True))
    for seed in range(2):
        args = _inputs(original, seed)
        want = _run(original, args)
        got = _run(optimized, args)
        for w, g in zip(want, got):
            assert w.tobytes() == g.tobytes(), f"{name} after {passes}:\n{print_ir(optimized)}"
