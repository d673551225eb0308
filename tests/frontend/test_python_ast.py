"""`tegula.python_ast`: parsing from several threads at once (the autotuner compiles
configs in threads). CPython 3.11 can fail such concurrent parses with `SystemError: AST
constructor recursion depth mismatch`; under the module's lock none fails."""
from __future__ import annotations

import inspect
from concurrent.futures import ThreadPoolExecutor

from tegula import python_ast
from tegula.runtime import autotuner


def test_concurrent_parses_and_compiles_all_succeed():
    source = inspect.getsource(autotuner)  # a large module: deep trees, long conversions

    def parse_and_compile(_: int) -> int:
        tree = python_ast.parse(source, "autotuner.py")
        python_ast.compile_tree(tree, "autotuner.py", "exec")
        return len(tree.body)

    with ThreadPoolExecutor(max_workers=8) as pool:
        sizes = list(pool.map(parse_and_compile, range(48)))
    assert len(set(sizes)) == 1 and sizes[0] > 10
