"""The text of the layout stage (`asm["tgir"]`): the tile IR as `ir.printer` writes it,
each line annotated with the layouts of its results, a `convert_layout` line wherever
an operand is consumed in another layout than its own (and how: `local` register
renaming, `remat` recomputation, or `smem` through shared memory), and a legend of the
layouts used."""
from __future__ import annotations

from ...ir.core import Kernel
from ...ir.printer import ValueNamer, render_lines
from .assign_layouts import LayoutPlan, is_rematerializable
from .linear_layout import LinearLayout, local_register_map


def conversion_kind(src: LinearLayout, dst: LinearLayout, rematerializable: bool) -> str:
    if src == dst or local_register_map(src, dst) is not None:
        return "local"
    return "remat" if rematerializable else "smem"


def format_tgir(kernel: Kernel, plan: LayoutPlan) -> str:
    namer = ValueNamer.for_kernel(kernel)
    lines, where = render_lines(kernel, locs=False, namer=namer)
    ids: dict[LinearLayout, int] = {}

    def lid(lay: LinearLayout) -> str:
        if lay not in ids:
            ids[lay] = len(ids)
        return f"#L{ids[lay]}"

    extra_before: dict[int, list[str]] = {}
    suffix: dict[int, str] = {}
    memo: dict = {}
    for ins in kernel.walk():
        at = where.get(id(ins))
        if at is None:
            continue
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        res = [lid(plan.layouts[r]) if r in plan.layouts else "-" for r in ins.results]
        if any(r != "-" for r in res):
            suffix[at] = "  // " + ", ".join(res)
        if ins in plan.vec and plan.vec[ins] > 1:
            suffix[at] = suffix.get(at, "  //") + f" vec={plan.vec[ins]}"
        for k, o in enumerate(ins.operands):
            src, dst = plan.layouts.get(o), plan.required(ins, k)
            if src is None or dst is None or src == dst:
                continue
            kind = conversion_kind(src, dst, is_rematerializable(o, memo))
            extra_before.setdefault(at, []).append(
                f"{indent}convert_layout {namer.name(o)} {lid(src)} -> {lid(dst)} ({kind})")
    out = []
    for i, line in enumerate(lines):
        out.extend(extra_before.get(i, []))
        out.append(line + suffix.get(i, ""))
    legend = [f"#L{i} = {lay}" for lay, i in ids.items()]
    return "\n".join([f"// num_warps = {plan.num_warps}"] + legend + out)
