"""The reference interpreter: executes tile IR with numpy, one program at a time.

It is the executable specification of the IR: what it computes is what the compiled
backends must produce. Every load and store is checked against the array its pointer
came from, and a bad access names the kernel line, the program id, the pointer
argument and the offending offsets.

    execute(kernel, grid, args, *, debug=False)    compile and run once
    compile_kernel(kernel, *, debug=False).run(grid, args)

Layout: `registry` (rule table, slot conventions), `compiler` (blocks → steps),
`program` (argument binding, the grid loop), `values` (storage and memory images),
`memory` (buffers, pointers, fake addresses), `access` (checked gathers/scatters), and
one `rules_*` module per family of ops. `INTERPRETER_RULES` maps every `ir.Op` to its
rule; `has_rule(op)` says whether one exists.
"""
from .program import CompiledProgram, compile_kernel, execute
from .registry import INTERPRETER_RULES, has_rule

__all__ = ["CompiledProgram", "INTERPRETER_RULES", "compile_kernel", "execute", "has_rule"]
