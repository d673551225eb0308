"""A TTIR-shaped summary of a compiled kernel, for tools that analyse Triton's IR
through its MLIR bindings.

PyTorch learns which arguments a user kernel inside a compiled graph writes (so it
knows what to clone for functionalization) by walking the kernel's TTIR:
`ASTSource.make_ir(...)` → `module.walk(fn)`, and for each op `get_name()`, its
operands, results, regions, parent block and `sym_name`; a `tt.store` / `tt.atomic_*`
whose pointer derives from a function argument marks it written, a `tt.load` read.

tegula has that answer directly: `passes.written_arguments` / `read_arguments` trace
every store's and load's pointer back to the kernel's arguments on its own IR (and
answer "all pointer arguments" whenever a pointer cannot be traced). `summarize`
states that answer in the shape the walker expects: one `tt.func` named after the
kernel, whose block arguments are the kernel's runtime arguments in order, holding a
`tt.load` per read pointer argument and a `tt.store` per written one, then
`tt.return`. Walking it yields exactly tegula's sets: no more clones than needed.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Optional, Sequence


class _Ids:
    def __init__(self) -> None:
        self._next = itertools.count(1)

    def __call__(self) -> int:
        return next(self._next)


class Value:
    def __init__(self, ids: _Ids, type_text: str) -> None:
        self._id = ids()
        self.type_text = type_text

    def id(self) -> int:
        return self._id


class Region:
    def __init__(self, ids: _Ids) -> None:
        self._id = ids()
        self.blocks: list[Block] = []

    def id(self) -> int:
        return self._id


class Block:
    def __init__(self, ids: _Ids, parent: Optional[Region], arg_types: Sequence[str]) -> None:
        self._id = ids()
        self.parent = parent
        self.args = [Value(ids, t) for t in arg_types]
        self.ops: list[Operation] = []
        if parent is not None:
            parent.blocks.append(self)

    def id(self) -> int:
        return self._id

    def get_num_arguments(self) -> int:
        return len(self.args)

    def get_argument(self, i: int) -> Value:
        return self.args[i]

    def get_parent(self) -> Optional[Region]:
        return self.parent


class Operation:
    def __init__(self, name: str, operands: Sequence[Value] = (), results: Sequence[Value] = (),
                 block: Optional[Block] = None, regions: Sequence[Region] = (),
                 attrs: Optional[dict[str, Any]] = None) -> None:
        self.name = name
        self.operands = list(operands)
        self.results = list(results)
        self.block = block
        self.regions = list(regions)
        self.attrs = dict(attrs or {})
        if block is not None:
            block.ops.append(self)

    def get_name(self) -> str:
        return self.name

    def get_num_operands(self) -> int:
        return len(self.operands)

    def get_operand(self, i: int) -> Value:
        return self.operands[i]

    def get_num_results(self) -> int:
        return len(self.results)

    def get_result(self, i: int) -> Value:
        return self.results[i]

    def get_num_regions(self) -> int:
        return len(self.regions)

    def get_region(self, i: int) -> Region:
        return self.regions[i]

    def get_block(self) -> Optional[Block]:
        return self.block

    def get_str_attr(self, name: str) -> str:
        return self.attrs[name]

    def get_flat_symbol_ref_attr(self, name: str) -> str:
        return self.attrs[name]

    def get_bool_attr(self, name: str) -> bool:
        return bool(self.attrs.get(name, False))


class Module:
    """The summary module: `walk(fn)` visits ops innermost first (as MLIR's walk does),
    `verify()`, and `str()` prints it like TTIR."""

    def __init__(self, func: Operation) -> None:
        self.func = func
        self.op = Operation("builtin.module", regions=())

    def walk(self, fn: Callable[[Operation], None]) -> None:
        for region in self.func.regions:
            for block in region.blocks:
                for op in block.ops:
                    fn(op)
        fn(self.func)
        fn(self.op)

    def verify(self) -> bool:
        return True

    def __str__(self) -> str:
        block = self.func.regions[0].blocks[0]
        names = {v.id(): f"%arg{i}" for i, v in enumerate(block.args)}
        params = ", ".join(f"{names[v.id()]}: {v.type_text}" for v in block.args)
        lines = ["module {", f"  tt.func public @{self.func.attrs['sym_name']}({params}) {{"]
        for op in block.ops:
            results = ""
            if op.results:
                for r in op.results:
                    names[r.id()] = f"%{len(names) - len(block.args)}"
                results = ", ".join(names[r.id()] for r in op.results) + " = "
            operands = ", ".join(names[o.id()] for o in op.operands)
            lines.append(f"    {results}{op.name} {operands}".rstrip())
        lines += ["  }", "}"]
        return "\n".join(lines)


def _type_text(t: Any) -> str:
    text = str(t)
    if text.startswith("ptr<"):
        return f"!tt.ptr<{text[4:-1]}>"
    return text


def summarize(name: str, args: Sequence[tuple[str, Any]], written: set[str], read: set[str]) -> Module:
    """The summary of kernel `name` whose runtime arguments are `args` (name, IR type),
    in order, reading through `read` and writing through `written`."""
    ids = _Ids()
    region = Region(ids)
    block = Block(ids, region, [_type_text(t) for _n, t in args])
    for (arg_name, _t), value in zip(args, block.args):
        if arg_name in read:
            Operation("tt.load", [value], [Value(ids, "tensor")], block)
    for (arg_name, _t), value in zip(args, block.args):
        if arg_name in written:
            Operation("tt.store", [value], [], block)
    Operation("tt.return", [], [], block)
    func = Operation("tt.func", [], [], None, [region], {"sym_name": name})
    return Module(func)


__all__ = ["Module", "summarize"]
