"""tegula's frontend: from the Python AST of a @jit function to tile IR.

`build_kernel(fn, signature, constexprs, arg_attrs, options) -> ir.Kernel` is the whole
interface (see docs/internals.md). The modules, one concept each:

- `source`      — capture and parse a function's source; AST positions → file locations
- `scope`       — local variables and what a kernel may reach outside them
- `scan`        — cheap syntactic scans (loop-carried names, hidden `return`s)
- `values`      — what the frontend knows of the language layer's values
- `expressions` — names, literals, attributes, indexing, operators, f-strings
- `statements`  — assignment, `assert`, `return`, expression statements
- `branches`    — `if` / conditional expressions, region results
- `loops`       — `for` over range / tl.range / tl.static_range, `while`
- `calls`       — builtins, Python builtins, @jit inlining
- `diagnostics` — the frontend's errors and their wording
- `signature`   — Triton argument type strings (`*fp32`, `i32`) as IR types
- `codegen`     — the visitor that ties them together; `kernel` — the entry point
"""
from .kernel import build_kernel

__all__ = ["build_kernel"]
