"""Declaring and calling functions and intrinsics on an llvmlite module, once each."""
from __future__ import annotations

from typing import Optional, Sequence

import llvmlite.ir as ir


def declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type],
            var_arg: bool = False) -> ir.Function:
    """The function `name` of `module`, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args), var_arg=var_arg), name)
    return fn


def call(b: ir.IRBuilder, name: str, ret: ir.Type, args: Sequence[ir.Value]) -> ir.Value:
    """Call `name(args)`, declaring it from the argument types on first use."""
    return b.call(declare(b.module, name, ret, [a.type for a in args]), list(args))


def type_suffix(t: ir.Type) -> str:
    """The overload suffix of an LLVM intrinsic for `t` (`f32`, `i64`, `v4f32`...)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}[str(t)]


def intrinsic(b: ir.IRBuilder, base: str, args: Sequence[ir.Value],
              ret: ir.Type | None = None) -> ir.Value:
    """Call an LLVM intrinsic overloaded on its first argument's type: `llvm.<base>.<ty>`."""
    ty = args[0].type
    return call(b, f"llvm.{base}.{type_suffix(ty)}", ret or ty, args)


def inline_asm(b: ir.IRBuilder, ret: ir.Type, args: Sequence[ir.Value], asm: str,
               constraints: str, side_effect: bool = False, convergent: Optional[bool] = None) -> ir.Value:
    """Call inline assembly `asm`. `convergent` (by default: whether the text names an
    `.aligned` instruction, a PTX collective every lane of a warp or warpgroup executes
    together) forbids LLVM to make the call control-dependent on more values than it is:
    tail duplication would otherwise copy it into both sides of a divergent branch, and
    lanes of one warp would wait at different instances (a hang)."""
    fnty = ir.FunctionType(ret, [a.type for a in args])
    if convergent is None:
        convergent = ".aligned" in asm
    return b.call(ir.InlineAsm(fnty, asm, constraints, side_effect=side_effect), list(args),
                  attrs=("convergent",) if convergent else ())
