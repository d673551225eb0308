"""Tile encodings: the registry through which `tgir` text names where a tile's elements
live (`#blocked<...>`, `#mma<...>`, ...), without `ir` importing a backend.

An encoding is a small immutable, hashable value owned by a backend; the IR needs only
its text form (`str(enc)`, which starts with `#name<`) and, to read text back, the
parser registered for `name`. Backends register theirs at import
(`register_encoding("blocked", BlockedEncoding.parse)`); the layout algebra behind an
encoding (`to_linear(shape)`) is the backend's business.

`fields(body)` splits an encoding's body `key=value, key=value` (values may nest
`<...>` and `[...]`) for the parsers; `int_list("[1, 2]")` reads a list of ints.
"""
from __future__ import annotations

from typing import Any, Callable

EncodingParser = Callable[[str], Any]

ENCODINGS: dict[str, EncodingParser] = {}


def register_encoding(name: str, parse: EncodingParser) -> None:
    """Make `#name<body>` readable: `parse(body)` returns the encoding value."""
    ENCODINGS[name] = parse


def parse_encoding(text: str) -> Any:
    """The encoding written as `#name<body>` (raises ValueError on anything else)."""
    text = text.strip()
    if not text.startswith("#") or "<" not in text or not text.endswith(">"):
        raise ValueError(f"an encoding is written '#name<...>', got {text!r}")
    name, body = text[1:text.index("<")], text[text.index("<") + 1:-1]
    if name not in ENCODINGS:
        known = ", ".join("#" + n for n in sorted(ENCODINGS)) or "none (import the backend that defines them)"
        raise ValueError(f"unknown encoding '#{name}'; known: {known}")
    return ENCODINGS[name](body)


def split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside any `<...>` / `[...]` nesting (parts stripped)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<[":
            depth += 1
        elif ch in ">]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail or parts:
        parts.append(tail)
    return parts


def fields(body: str) -> dict[str, str]:
    """An encoding body `key=value, key=value` as a dict of value texts."""
    out = {}
    for part in split_top(body):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"expected 'key=value' in an encoding, got {part!r}")
        out[key.strip()] = value.strip()
    return out


def int_list(text: str) -> tuple[int, ...]:
    """`[1, 2, 3]` as a tuple of ints."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"expected a list '[...]', got {text!r}")
    inner = text[1:-1].strip()
    return tuple(int(x) for x in inner.split(",")) if inner else ()


def format_ints(values: Any) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"
