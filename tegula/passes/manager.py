"""The pass manager: a registry of passes by name and `run_pipeline`.

A pass is a plain function `pass_fn(kernel, ctx) -> kernel` (it may rewrite the kernel
in place and return it, or return a new one). `run_pipeline` runs a named pipeline
(`pipelines.PIPELINES`) or an explicit list of pass names / functions, and around each
pass it
- verifies the IR before the first pass and after every pass when `ctx.verify`
  (`tegula.ir.verifier.verify`), so a broken invariant is blamed on the pass that broke
  it;
- adds the pass's wall time to `ctx.timings[name]` (a pass listed twice accumulates);
- calls `ctx.dump(pass_name, "before" | "after", ir_text)` for the passes selected by
  `ctx.dump_passes` (None: all);
- turns any exception other than a `CompilationError` (which is already about the
  user's code and passes through untouched) into `PassError("during pass X: ...")`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Optional, Sequence, Union

from ..errors import CompilationError, InternalCompilerError
from ..ir.core import Kernel

PassFn = Callable[[Kernel, "PassContext"], Kernel]
DumpHook = Callable[[str, str, str], None]

PASSES: dict[str, PassFn] = {}


def register_pass(name: str, fn: Optional[PassFn] = None):
    """Register `fn` under `name` (also usable as a decorator: `@register_pass("x")`)."""
    def add(f: PassFn) -> PassFn:
        PASSES[name] = f
        return f
    return add(fn) if fn is not None else add


def _default_verify() -> bool:
    from ..config import knobs

    return bool(knobs.verify_ir)


@dataclass
class PassContext:
    """What a pipeline run shares with its passes and reports back.

    `options`: the compile options (passes may read them; None in unit tests).
    `verify`: verify the IR between passes (default: the `TEGULA_VERIFY_IR` knob).
    `timings`: seconds spent per pass name, filled in by `run_pipeline`.
    `dump`: hook called as `dump(pass_name, "before" | "after", ir_text)`.
    `dump_passes`: names of the passes to dump around (None: every pass).
    `stage`: the IR stage name given to the verifier (which ops are allowed)."""

    options: Any = None
    verify: bool = field(default_factory=_default_verify)
    timings: dict[str, float] = field(default_factory=dict)
    dump: Optional[DumpHook] = None
    dump_passes: Optional[Collection[str]] = None
    stage: Optional[str] = None


class PassError(InternalCompilerError):
    """An internal error in a pass, or IR a pass left malformed. Names the pass."""

    def __init__(self, pass_name: str, message: str):
        self.pass_name = pass_name
        super().__init__(f"during pass {pass_name}: {message}")


def ir_text(kernel: Kernel) -> str:
    """The kernel's text form (the IR printer's)."""
    from ..ir.printer import print_ir

    return print_ir(kernel)


def _verify(kernel: Kernel, ctx: PassContext, pass_name: str, on_input: bool = False) -> None:
    from ..ir.verifier import verify

    try:
        verify(kernel, ctx.stage)
    except Exception as e:
        what = "its input IR is malformed" if on_input else "IR verification failed"
        raise PassError(pass_name, f"{what}\n{e}") from e


PassSpec = Union[str, PassFn]


def resolve_passes(name_or_list: Union[str, Sequence[PassSpec]]) -> list[tuple[str, PassFn]]:
    """(name, function) of each pass of a pipeline name or list."""
    from .pipelines import PIPELINES

    if isinstance(name_or_list, str):
        if name_or_list in PIPELINES:
            specs: Sequence[PassSpec] = PIPELINES[name_or_list]
        elif name_or_list in PASSES:
            specs = [name_or_list]
        else:
            raise KeyError(f"unknown pipeline or pass {name_or_list!r}; pipelines: "
                           f"{', '.join(sorted(PIPELINES))}; passes: {', '.join(sorted(PASSES))}")
    else:
        specs = name_or_list
    out = []
    for spec in specs:
        if isinstance(spec, str):
            if spec not in PASSES:
                raise KeyError(f"unknown pass {spec!r}; known: {', '.join(sorted(PASSES))}")
            out.append((spec, PASSES[spec]))
        else:
            out.append((getattr(spec, "__name__", repr(spec)), spec))
    return out


def run_pipeline(kernel: Kernel, name_or_list: Union[str, Sequence[PassSpec]],
                 ctx: Optional[PassContext] = None) -> Kernel:
    """Run the passes of a named pipeline (or a list of pass names / functions) over
    `kernel` and return the result. See the module docstring for what happens around
    each pass."""
    ctx = ctx if ctx is not None else PassContext()
    passes = resolve_passes(name_or_list)
    if ctx.verify and passes:
        _verify(kernel, ctx, passes[0][0], on_input=True)
    for name, fn in passes:
        dumping = ctx.dump is not None and (ctx.dump_passes is None or name in ctx.dump_passes)
        if dumping:
            ctx.dump(name, "before", ir_text(kernel))
        start = time.perf_counter()
        try:
            result = fn(kernel, ctx)
        except CompilationError:
            raise
        except PassError:
            raise
        except Exception as e:
            raise PassError(name, f"{type(e).__name__}: {e}") from e
        finally:
            ctx.timings[name] = ctx.timings.get(name, 0.0) + time.perf_counter() - start
        if not isinstance(result, Kernel):
            raise PassError(name, f"the pass returned {type(result).__name__}, not a Kernel")
        kernel = result
        if dumping:  # before verifying, so that a malformed result can be looked at
            ctx.dump(name, "after", ir_text(kernel))
        if ctx.verify:
            _verify(kernel, ctx, name)
    return kernel
