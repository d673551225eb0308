"""Sources of functions defined by `exec` / `compile` of a string.

`inspect` cannot read such a function's source (its file is "<string>"), yet programs
build kernels that way, Triton's own tests among them (they edit a kernel's source text
and `exec` it). Python announces every compilation of a string with the `compile`
audit event, which carries the text; this module keeps the most recent such texts that
mention `jit`, and `find(code)` returns the one that defines a function with exactly this
code object (compiled again and compared, so an edited copy of the same function never
matches the wrong text). `register_lines` gives such text a pseudo file name that
`linecache` (and so error messages) can read.
"""
from __future__ import annotations

import collections
import hashlib
import linecache
import sys
import threading
from types import CodeType
from typing import Optional

_RECENT: "collections.deque[str]" = collections.deque(maxlen=256)
_LOCK = threading.Lock()


def _remember(event: str, args: tuple) -> None:
    if event != "compile" or len(args) < 2 or not isinstance(args[1], str) or not args[1].startswith("<"):
        return
    source = args[0]
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError:
            return
    if isinstance(source, str) and "jit" in source and "def " in source:
        with _LOCK:
            _RECENT.append(source)


sys.addaudithook(_remember)


def _code_objects(code: CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_objects(const)


def find(code: CodeType) -> Optional[str]:
    """The text (newest first) whose compilation contains `code`'s twin, or None."""
    with _LOCK:
        candidates = list(reversed(_RECENT))
    for text in candidates:
        if f"def {code.co_name}" not in text:
            continue
        try:
            compiled = compile(text, code.co_filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue
        for c in _code_objects(compiled):
            if (c.co_name == code.co_name and c.co_firstlineno == code.co_firstlineno
                    and c.co_code == code.co_code and c.co_consts == code.co_consts):
                return text
    return None


def register_lines(name: str, lines: list[str]) -> str:
    """A pseudo file name for exec'd text, registered with `linecache` so that located
    errors show the kernel's source lines."""
    digest = hashlib.sha1("".join(lines).encode("utf-8")).hexdigest()[:10]
    file = f"<exec {name} {digest}>"
    linecache.cache[file] = (sum(len(x) for x in lines), None, list(lines), file)
    return file
