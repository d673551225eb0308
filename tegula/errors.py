"""User-facing errors and how a source location is rendered.

Every error a kernel author sees names their own file:line:col, shows the source line
with a caret under the offending span, and (for errors inside called @jit functions)
the chain of calls that led there. No tegula-internal frames are shown unless
`TEGULA_DEBUG_FRONTEND=1` (see `config`): raisers use `raise ... from None`.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass
from typing import Optional, Sequence

from .ir.core import Loc


def render_location(loc: Loc, message: str, kind: str = "error") -> str:
    """`path:LINE:COL: error: message`, then the source line and a caret under the span."""
    head = f"{loc.file}:{loc.line}:{loc.col + 1}: {kind}: {message}"
    line = linecache.getline(loc.file, loc.line) if loc.line > 0 else ""
    if not line:
        return head
    line = line.rstrip("\n")
    end = loc.end_col if loc.end_col is not None and loc.end_col > loc.col else loc.col + 1
    end = min(end, max(len(line), loc.col + 1))
    caret = " " * loc.col + "^" + "~" * max(0, end - loc.col - 1)
    return f"{head}\n{line}\n{caret}"


@dataclass(frozen=True)
class CallSite:
    """One frame of the @jit call chain: where `callee` was called from."""

    loc: Loc
    callee: str


class TegulaError(Exception):
    """Base class of every error tegula raises on purpose."""


class CompilationError(TegulaError):
    """A kernel could not be compiled. Triton's name for it.

    `loc` is where in the user's source the problem is; `call_chain` lists the call
    sites (outermost first) through which a nested @jit function was reached."""

    def __init__(self, message: str, loc: Optional[Loc] = None,
                 call_chain: Sequence[CallSite] = ()):
        self.message = message
        self.loc = loc
        self.call_chain = tuple(call_chain)
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        parts = [render_location(self.loc, self.message)]
        for site in reversed(self.call_chain):
            parts.append(render_location(site.loc, f"in the call to '{site.callee}' from here",
                                         kind="note"))
        return "\n".join(parts)

    # Triton exposes the source excerpt under `src`; keep the attribute for scripts.
    @property
    def src(self) -> str:
        return str(self)

    @property
    def error_message(self) -> str:
        """The message without the location (Triton's attribute; its tests match on it)."""
        return self.message


class KernelArgumentError(TegulaError, TypeError):
    """A launch got the wrong number or kind of arguments (checked before any compile)."""


class KernelArgumentOverflow(KernelArgumentError, OverflowError):
    """An int argument outside the 64-bit range (below -2**63 or from 2**64 on): also an
    OverflowError, which is what Triton raises (and what code written for it catches)."""


class LaunchOptionAssertion(KernelArgumentError, AssertionError):
    """A launch option Triton checks with an `assert` (num_warps a power of 2): also an
    AssertionError, so code written for Triton catches it."""


class LaunchOptionValueError(KernelArgumentError, ValueError):
    """A launch option Triton rejects with a ValueError (an `arch` it cannot parse or
    compile for): also a ValueError."""


class KernelRuntimeError(TegulaError):
    """An error while a kernel ran: the kernel line, the program id and the details.

    `loc` is the kernel source location of the failing instruction and `pid` the
    program id (x, y, z) that failed."""

    def __init__(self, message: str, loc: Optional[Loc] = None,
                 pid: Optional[tuple[int, int, int]] = None):
        self.message = message
        self.loc = loc
        self.pid = pid
        where = f" (program id {pid})" if pid is not None else ""
        text = message + where
        super().__init__(render_location(loc, text) if loc is not None else text)


class OutOfBoundsError(KernelRuntimeError, IndexError):
    """A load or store touched memory outside the array its pointer came from."""


class DeviceAssertionError(KernelRuntimeError, AssertionError):
    """`tl.device_assert` / `assert` in a kernel failed (with debug on)."""


class InternalCompilerError(TegulaError):
    """A fault in tegula's compiler itself, not in the kernel (a pass failing on valid
    IR). The autotuner skips a config that hits one, as any config that fails to
    compile, but says so: it is a bug to report, and the config may have been the
    fastest."""


class AutotunerError(TegulaError):
    """No autotuning config survived; the message lists each config's reason."""


class OutOfResources(TegulaError):
    """A compiled kernel needs more of a resource (shared memory, registers) than the
    device has. Triton's name, kept for autotuners and user code that catch it."""

    def __init__(self, required: int, limit: int, name: str):
        self.required, self.limit, self.name = required, limit, name
        super().__init__(f"out of resource: {name}, required: {required}, hardware limit: {limit}")
