"""The IR's text form, writing side: `print_ir` turns a kernel, block or instruction
into deterministic text that `parser.parse_ir` reads back.

The grammar is documented in docs/internals.md ("Text form"). This module also owns
the pieces the parser and the verifier share with it: value numbering (`ValueNamer`),
literal and location formatting, and `render_lines`, which remembers on which line each
instruction was printed so the verifier can put a marker under it.
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Optional, Union

from .attrs import ATTR_CLASSES
from .core import UNKNOWN_LOC, ArgAttrs, Block, Instr, Kernel, Loc, Value
from .ops import OP_INFO

INDENT = "  "

Printable = Union[Kernel, Block, Instr]


# ---------------------------------------------------------------- literals and locations

def format_literal(value: Any) -> str:
    """Python literal syntax for an attribute value, readable by the parser's literal
    reader. inf/nan print as the bare names `inf`, `-inf`, `nan` (repr would give the
    same, but we spell it out so it never depends on numpy's repr)."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple)):
        # numpy scalars print as `np.float32(1.5)` under numpy 2; store the Python value
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (int, str)):
        return repr(value)
    if isinstance(value, tuple):
        inner = ", ".join(format_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_literal(v) for v in value) + "]"
    return repr(value)


def format_loc(loc: Loc) -> str:
    """`loc("file":LINE:COL)` with a 1-based column (as in compiler messages), or
    `loc("file":LINE:COL-END)` when the span's end column is known."""
    # json escapes are a subset of Python's, so the parser can read them with json too
    text = f"loc({json.dumps(loc.file, ensure_ascii=False)}:{loc.line}:{loc.col + 1}"
    if loc.end_col is not None:
        text += f"-{loc.end_col}"
    return text + ")"


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def format_attrs(ins: Instr) -> str:
    """`{name = value, ...}` in field order, fields at their default value left out
    (the parser fills them in); nothing at all when every field is at its default.
    Prefixed by `#ClassName` when the record is not the class the op table names (only
    in IR the verifier will reject)."""
    attrs = ins.attrs
    expected = OP_INFO[ins.op].attrs if ins.op in OP_INFO else None
    if not is_dataclass(attrs) or isinstance(attrs, type):
        return "#<" + repr(attrs) + ">"
    shown = [f for f in fields(attrs) if getattr(attrs, f.name) != _default(f)]
    body = "{" + ", ".join(f"{f.name} = {format_literal(getattr(attrs, f.name))}" for f in shown) + "}"
    if type(attrs) is expected:
        return body if shown else ""
    name = type(attrs).__name__
    if ATTR_CLASSES.get(name) is not type(attrs):
        name = "<" + name + ">"  # not an IR attribute class: printable, not parseable
    return f"#{name}{body}"


def format_arg_attrs(attrs: Optional[ArgAttrs]) -> str:
    """Only the fields that differ from `ArgAttrs()`; empty when all are defaults."""
    if attrs is None:
        return ""
    default = ArgAttrs()
    items = [f"{f.name} = {format_literal(getattr(attrs, f.name))}"
             for f in fields(attrs) if getattr(attrs, f.name) != getattr(default, f.name)]
    return " {" + ", ".join(items) + "}" if items else ""


# ---------------------------------------------------------------- value names

class ValueNamer:
    """Deterministic names: kernel arguments keep their names; every other value is
    numbered `%0, %1, ...` in textual order (an instruction's results before the block
    arguments and contents of its regions). Values used but not defined in the printed
    unit get `%ext.N`."""

    def __init__(self) -> None:
        self.names: dict[Value, str] = {}
        self._next = 0
        self._next_ext = 0

    def name(self, v: Value) -> str:
        if v not in self.names:
            self.names[v] = f"ext.{self._next_ext}"
            self._next_ext += 1
        return "%" + self.names[v]

    def number(self, v: Value) -> None:
        if v not in self.names:
            self.names[v] = str(self._next)
            self._next += 1

    def number_block(self, block: Block) -> None:
        for a in block.args:
            self.number(a)
        for ins in block.instrs:
            self.number_instr(ins)

    def number_instr(self, ins: Instr) -> None:
        for r in ins.results:
            self.number(r)
        for region in ins.regions:
            self.number_block(region)

    @classmethod
    def for_kernel(cls, kernel: Kernel) -> "ValueNamer":
        namer = cls()
        for i, a in enumerate(kernel.body.args):
            namer.names[a] = kernel_arg_name(kernel, i)
        for ins in kernel.body.instrs:
            namer.number_instr(ins)
        return namer


def kernel_arg_name(kernel: Kernel, i: int) -> str:
    if i < len(kernel.arg_names) and kernel.arg_names[i]:
        return kernel.arg_names[i]
    name = kernel.body.args[i].name
    return name if name else f"arg{i}"


# ---------------------------------------------------------------- the printer

class _Printer:
    def __init__(self, namer: ValueNamer, locs: bool) -> None:
        self.namer = namer
        self.locs = locs
        self.lines: list[str] = []
        self.instr_lines: dict[int, int] = {}  # id(instr) -> index into lines

    def types(self, values: list[Value]) -> str:
        return ", ".join(str(v.type) for v in values)

    def loc_suffix(self, loc: Loc) -> str:
        if not self.locs or loc is None or loc == UNKNOWN_LOC:
            return ""
        return " " + format_loc(loc)

    def block(self, block: Block, depth: int, show_args: bool = True) -> None:
        if show_args and block.args:
            args = ", ".join(f"{self.namer.name(a)}: {a.type}" for a in block.args)
            self.lines.append(INDENT * max(depth - 1, 0) + f"^({args}):")
        for ins in block.instrs:
            self.instr(ins, depth)

    def instr(self, ins: Instr, depth: int) -> None:
        pad = INDENT * depth
        text = ""
        if ins.results:
            text = ", ".join(self.namer.name(r) for r in ins.results) + " = "
        text += getattr(ins.op, "value", repr(ins.op))  # never fail on malformed IR
        if ins.operands:
            text += " " + ", ".join(self.namer.name(o) for o in ins.operands)
        attrs_text = format_attrs(ins) if ins.attrs is not None else ""
        if attrs_text:
            text += " " + attrs_text
        if ins.smem is not None:
            text += f" smem({ins.smem[0]}, {ins.smem[1]})"
        info = OP_INFO.get(ins.op)
        if info is not None and info.regions:
            # region ops show operand types too: a reader of `for` needs them to see
            # which operands are bounds and which are loop-carried
            if ins.operands:
                text += " : " + self.types(ins.operands)
            if ins.results:
                text += " -> " + self.types(ins.results)
        elif ins.results:
            text += " : " + self.types(ins.results)
        text += self.loc_suffix(ins.loc)
        self.instr_lines[id(ins)] = len(self.lines)
        if not ins.regions:
            self.lines.append(pad + text)
            return
        self.lines.append(pad + text + " {")
        for i, region in enumerate(ins.regions):
            if i:
                self.lines.append(pad + "} {")
            self.block(region, depth + 1)
        self.lines.append(pad + "}")

    def kernel(self, kernel: Kernel) -> None:
        args = []
        for i, a in enumerate(kernel.body.args):
            attrs = kernel.arg_attrs[i] if i < len(kernel.arg_attrs) else None
            args.append(f"{self.namer.name(a)}: {a.type}{format_arg_attrs(attrs)}")
        head = f"kernel @{kernel.name}(" + ", ".join(args) + ")" + self.loc_suffix(kernel.loc)
        self.lines.append(head + " {")
        self.block(kernel.body, 1, show_args=False)
        self.lines.append("}")


def render_lines(obj: Printable, locs: bool = False,
                 namer: Optional[ValueNamer] = None) -> tuple[list[str], dict[int, int]]:
    """The printed lines of `obj` and, for each instruction, the index of its (first)
    line, keyed by `id(instr)`. For a kernel, line 0 is the header."""
    if not isinstance(obj, (Kernel, Block, Instr)):
        raise TypeError(f"print_ir takes a Kernel, Block or Instr, not {type(obj).__name__}")
    if namer is None:
        if isinstance(obj, Kernel):
            namer = ValueNamer.for_kernel(obj)
        else:
            namer = ValueNamer()
            if isinstance(obj, Block):
                namer.number_block(obj)
            else:
                namer.number_instr(obj)
    p = _Printer(namer, locs)
    if isinstance(obj, Kernel):
        p.kernel(obj)
    elif isinstance(obj, Block):
        # a block's `^(...)` line sits one level left of its instructions
        p.block(obj, 1 if obj.args else 0)
    else:
        p.instr(obj, 0)
    return p.lines, p.instr_lines


def print_ir(obj: Printable, locs: bool = False) -> str:
    """The text form of a kernel, block or instruction (no trailing newline).

    With `locs=True` every instruction with a known source location ends in
    `loc("file":LINE:COL)`. Printing never fails on malformed IR, so the verifier can
    show it."""
    return "\n".join(render_lines(obj, locs)[0])
