"""tegula's backends: each turns tile IR into something that runs.

- `interpreter`: the numpy executor of the tile IR, the executable specification.
- `llvm`, `cpu`, `cuda`: compiled backends (see docs/design.md §6).

Backends import `tegula.ir` and `tegula.passes`, never each other.
"""
