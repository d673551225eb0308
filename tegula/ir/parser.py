"""The IR's text form, reading side: `parse_ir` reads exactly what `printer.print_ir`
writes (locations included) back into an `ir.Kernel`.

A hand-written recursive-descent reader over the characters, so errors can name the
line and column. The grammar is in docs/internals.md ("Text form"). The parser checks
only what it needs to build the IR (names defined before use, known ops, well-formed
types and attributes, type lists that agree with the operands); everything else —
dominance across regions, op typing rules, region conventions — is the verifier's job,
so IR that fails verification can still be written as text in tests.
"""
from __future__ import annotations

import ast
import json
import math
import re
from typing import Any, Optional

from .. import python_ast
from .attrs import ATTR_CLASSES
from .core import UNKNOWN_LOC, ArgAttrs, Block, Instr, Kernel, Loc, Value
from .ops import OP_BY_NAME, OP_INFO
from .types import Type, parse_type

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")
_VALUE_NAME = re.compile(r"[A-Za-z0-9_.$]+")
_TYPE_HEAD = re.compile(r"[a-z][a-z0-9]*")
_INT = re.compile(r"-?[0-9]+")
_NAMED_LITERALS = {"inf": math.inf, "nan": math.nan}


class IRParseError(ValueError):
    """Malformed IR text. `line` and `col` are 1-based; the message shows the line
    with a caret under the problem."""

    def __init__(self, message: str, line: int, col: int, source_line: str):
        self.message = message
        self.line = line
        self.col = col
        caret = " " * (col - 1) + "^"
        super().__init__(f"line {line}:{col}: {message}\n  {source_line}\n  {caret}")


def parse_literal(text: str) -> Any:
    """A Python literal as the printer writes it: numbers, strings, booleans, None,
    tuples and lists of them, and the names `inf` / `nan` (with an optional sign)."""
    return _literal(python_ast.parse(text.strip(), mode="eval").body)


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in _NAMED_LITERALS:
        return _NAMED_LITERALS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _literal(node.operand)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    raise ValueError(f"not a literal: {ast.unparse(node)}")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.values: dict[str, Value] = {}

    # ------------------------------------------------------------ characters and errors
    def error(self, message: str, pos: Optional[int] = None) -> IRParseError:
        pos = self.pos if pos is None else pos
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        end = len(self.text) if end < 0 else end
        line = self.text.count("\n", 0, pos) + 1
        return IRParseError(message, line, pos - start + 1, self.text[start:end])

    def skip_space(self) -> None:
        """Spaces, tabs and `//` comments, but not newlines: they end instructions."""
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r":
                self.pos += 1
            elif text.startswith("//", self.pos):
                nl = text.find("\n", self.pos)
                self.pos = n if nl < 0 else nl
            else:
                break

    def skip_lines(self) -> None:
        while True:
            self.skip_space()
            if self.pos < len(self.text) and self.text[self.pos] == "\n":
                self.pos += 1
            else:
                return

    def peek(self, s: str) -> bool:
        self.skip_space()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, context: str = "") -> None:
        if not self.accept(s):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{s}'{where}, found {self.found()}")

    def found(self) -> str:
        self.skip_space()
        if self.pos >= len(self.text):
            return "end of text"
        if self.text[self.pos] == "\n":
            return "end of line"
        m = re.compile(r"\S+").match(self.text, self.pos)
        return repr(m.group(0)[:20]) if m else "?"

    def at_eol(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.text) or self.text[self.pos] == "\n"

    def expect_eol(self) -> None:
        if not self.at_eol():
            raise self.error(f"expected end of line, found {self.found()}")

    def regex(self, pattern: re.Pattern, what: str) -> str:
        self.skip_space()
        m = pattern.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        return m.group(0)

    # ------------------------------------------------------------ names, types, literals
    def value_name(self) -> str:
        self.expect("%")
        return self.text[self.pos - 1] + self.regex(_VALUE_NAME, "a value name after '%'")

    def use(self) -> Value:
        pos = self.pos
        name = self.value_name()
        if name not in self.values:
            raise self.error(f"use of undefined value {name}", pos)
        return self.values[name]

    def define(self, name: str, type: Type, pos: int) -> Value:
        if name in self.values:
            raise self.error(f"value {name} is defined twice", pos)
        label = name[1:]
        v = Value(type, "" if label.isdigit() else label)
        self.values[name] = v
        return v

    def type(self) -> Type:
        self.skip_space()
        start = self.pos
        self.regex(_TYPE_HEAD, "a type")
        if self.text.startswith("<", self.pos):
            depth = 0
            while self.pos < len(self.text) and self.text[self.pos] != "\n":
                ch = self.text[self.pos]
                self.pos += 1
                depth += (ch == "<") - (ch == ">")
                if depth == 0:
                    break
            else:
                raise self.error("unbalanced '<' in type", start)
        try:
            return parse_type(self.text[start:self.pos])
        except ValueError as e:
            raise self.error(f"bad type {self.text[start:self.pos]!r}: {e}", start) from None

    def type_list(self) -> list[Type]:
        types = [self.type()]
        while self.accept(","):
            types.append(self.type())
        return types

    def literal_text(self) -> tuple[str, int]:
        """The raw text of one attribute value: up to the next ',' or '}' outside
        brackets and string quotes."""
        self.skip_space()
        start, depth, quote = self.pos, 0, ""
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch == "\n":
                break
            if quote:
                if ch == "\\":
                    self.pos += 1
                elif ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch in ",}" and depth == 0:
                return text[start:self.pos], start
            self.pos += 1
        raise self.error("unterminated attribute value (missing '}'?)", start)

    def attr_dict(self) -> dict[str, Any]:
        self.expect("{")
        fields: dict[str, Any] = {}
        if self.accept("}"):
            return fields
        while True:
            pos = self.pos
            name = self.regex(_IDENT, "an attribute name")
            if name in fields:
                raise self.error(f"attribute '{name}' given twice", pos)
            self.expect("=", f"after attribute name '{name}'")
            raw, at = self.literal_text()
            try:
                fields[name] = parse_literal(raw)
            except (SyntaxError, ValueError) as e:
                msg = e.msg if isinstance(e, SyntaxError) else str(e)
                raise self.error(f"bad value for attribute '{name}': {msg}", at) from None
            if self.accept("}"):
                return fields
            self.expect(",", "or '}' between attributes")

    def make_attrs(self, cls: Optional[type], fields: dict[str, Any], pos: int, what: str) -> Any:
        if cls is None:
            raise self.error(f"{what} takes no attributes", pos)
        try:
            return cls(**fields)
        except TypeError as e:
            raise self.error(f"bad attributes for {what} ({cls.__name__}): {e}", pos) from None

    def loc(self) -> Loc:
        self.expect("loc(")
        self.skip_space()
        start = self.pos
        if not self.text.startswith('"', start):
            raise self.error("expected a quoted file name in loc(...)")
        end = start + 1
        while end < len(self.text) and self.text[end] not in '"\n':
            end += 2 if self.text[end] == "\\" else 1
        try:
            file = json.loads(self.text[start:end + 1])
        except ValueError:
            raise self.error("bad file name string in loc(...)", start) from None
        self.pos = end + 1
        self.expect(":", "after the file name in loc(...)")
        line = int(self.regex(_INT, "a line number"))
        self.expect(":", "after the line number in loc(...)")
        col = int(self.regex(_INT, "a column number"))
        end_col = int(self.regex(_INT, "an end column")) if self.accept("-") else None
        self.expect(")", "closing loc(...)")
        return Loc(file, line, col - 1, end_col)

    # ------------------------------------------------------------ structure
    def region_brace_follows(self) -> bool:
        """`{` at the end of a line opens a region; any other `{` opens attributes."""
        if not self.peek("{"):
            return False
        saved = self.pos
        self.pos += 1
        eol = self.at_eol()
        self.pos = saved
        return eol

    def instr(self) -> Instr:
        result_names: list[tuple[str, int]] = []
        if self.peek("%"):
            while True:
                self.skip_space()
                result_names.append((self.value_name(), self.pos))
                if not self.accept(","):
                    break
            self.expect("=", "after the result names")
        self.skip_space()
        pos = self.pos
        name = self.regex(_IDENT, "an op name")
        op = OP_BY_NAME.get(name)
        if op is None:
            raise self.error(f"unknown op '{name}'", pos)
        info = OP_INFO[op]
        operands: list[tuple[Value, int]] = []
        if self.peek("%"):
            while True:
                self.skip_space()
                at = self.pos
                operands.append((self.use(), at))
                if not self.accept(","):
                    break
        attrs = None
        if self.peek("#") or (self.peek("{") and not self.region_brace_follows()):
            at = self.pos
            cls = info.attrs
            if self.accept("#"):
                cls_name = self.regex(_IDENT, "an attribute class name")
                cls = ATTR_CLASSES.get(cls_name)
                if cls is None:
                    raise self.error(f"unknown attribute class '{cls_name}'", at)
            attrs = self.make_attrs(cls, self.attr_dict(), at, f"'{name}'")
        elif info.attrs is not None and not info.attrs_optional:
            # every field at its default: the printer wrote none
            attrs = self.make_attrs(info.attrs, {}, self.pos, f"'{name}'")
        smem = None
        if self.accept("smem("):
            offset = int(self.regex(_INT, "a shared-memory offset"))
            self.expect(",", "in smem(offset, size)")
            size = int(self.regex(_INT, "a shared-memory size"))
            self.expect(")", "closing smem(offset, size)")
            smem = (offset, size)
        first = self.type_list() if self.accept(":") else None
        arrow = self.type_list() if self.accept("->") else None
        if info.regions:
            operand_types, result_types = first, arrow
        elif arrow is not None:
            raise self.error(f"'{name}' has no regions: its result types follow ':', not '->'")
        else:
            operand_types, result_types = None, first
        if operand_types is not None:
            self.check_operand_types(name, operands, operand_types, pos)
        result_types = result_types or []
        if len(result_types) != len(result_names):
            raise self.error(f"'{name}' names {len(result_names)} result(s) but gives "
                             f"{len(result_types)} result type(s)", pos)
        results = [self.define(n, t, p) for (n, p), t in zip(result_names, result_types)]
        loc = self.loc() if self.peek("loc(") else UNKNOWN_LOC
        regions = []
        if self.accept("{"):
            regions = self.regions()
        else:
            self.expect_eol()
        return Instr(op, [v for v, _ in operands], results, attrs, regions, loc, smem)

    def check_operand_types(self, name: str, operands: list[tuple[Value, int]],
                            types: list[Type], pos: int) -> None:
        if len(types) != len(operands):
            raise self.error(f"'{name}' has {len(operands)} operand(s) but {len(types)} "
                             "operand type(s)", pos)
        for (v, at), t in zip(operands, types):
            if v.type != t:
                raise self.error(f"operand has type {v.type} but the type list says {t}", at)

    def regions(self) -> list[Block]:
        self.expect_eol()
        regions = []
        while True:
            regions.append(self.block())
            self.expect("}", "closing the region")
            if not self.accept("{"):
                break
            self.expect_eol()
        self.expect_eol()
        return regions

    def block(self, block: Optional[Block] = None) -> Block:
        """Instructions up to (not including) the closing '}'; a region's block may
        start with its arguments `^(%a: type, ...):`."""
        allow_args = block is None
        block = Block() if block is None else block
        self.skip_lines()
        if self.peek("^"):
            if not allow_args:
                raise self.error("the kernel body takes its arguments in the kernel header")
            self.pos += 1
            self.expect("(", "after '^'")
            if not self.accept(")"):
                while True:
                    self.skip_space()
                    at = self.pos
                    arg_name = self.value_name()
                    self.expect(":", f"after block argument {arg_name}")
                    v = self.define(arg_name, self.type(), at)
                    v.owner = block
                    block.args.append(v)
                    if self.accept(")"):
                        break
                    self.expect(",", "or ')' between block arguments")
            self.expect(":", "after the block arguments")
            self.expect_eol()
        while True:
            self.skip_lines()
            if self.pos >= len(self.text):
                raise self.error("unexpected end of text: a '}' is missing")
            if self.peek("}"):
                return block
            block.instrs.append(self.instr())

    def kernel(self) -> Kernel:
        self.skip_lines()
        if not self.peek("kernel"):
            raise self.error(f"expected 'kernel', found {self.found()}")
        self.pos += len("kernel")
        self.expect("@", "before the kernel name")
        name = self.regex(_IDENT, "a kernel name")
        self.expect("(", "after the kernel name")
        body = Block()
        arg_names: list[str] = []
        arg_attrs: list[ArgAttrs] = []
        if not self.accept(")"):
            while True:
                self.skip_space()
                at = self.pos
                arg_name = self.value_name()
                self.expect(":", f"after argument {arg_name}")
                v = self.define(arg_name, self.type(), at)
                v.owner = body
                body.args.append(v)
                arg_names.append(arg_name[1:])
                attrs = ArgAttrs()
                if self.peek("{"):
                    at = self.pos
                    attrs = self.make_attrs(ArgAttrs, self.attr_dict(), at, "a kernel argument")
                arg_attrs.append(attrs)
                if self.accept(")"):
                    break
                self.expect(",", "or ')' between kernel arguments")
        loc = self.loc() if self.peek("loc(") else UNKNOWN_LOC
        self.expect("{", "opening the kernel body")
        self.expect_eol()
        self.block(body)
        self.expect("}")
        self.skip_lines()
        if self.pos < len(self.text):
            raise self.error(f"unexpected text after the kernel: {self.found()}")
        return Kernel(name, body, arg_names, arg_attrs, loc)


def parse_ir(text: str) -> Kernel:
    """Read a kernel from its text form; raises `IRParseError` with the line and
    column of the first problem."""
    return _Parser(text).kernel()
