"""Read a `.hatchet` profile and print it as a tree (proton's `viewer`, without the
hatchet/pandas dependency).

    tree, metrics = viewer.parse(["tflop16/s", "time/ms"], "matmul.hatchet")
    viewer.print_tree(tree, metrics)
    python -m tegula.profiler.viewer -m time/ms,count matmul.hatchet

Metrics are the raw ones recorded (`time (ns)`, `count`, `bytes`, `flops16`, ...,
by their name with or without the unit) or derived ones: `time/s|ms|us|ns`,
`avg_time/s|ms|us|ns` (per occurrence), `[g|t]flop/s` (all flops widths together),
`[g|t]flopN/s` (width N), `[g|t]byte/s`. Every value is inclusive: a scope's
flops and bytes include those of the kernels below it.
"""
from __future__ import annotations

import argparse
import json
import re
from typing import Any, Optional

_TIME_UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
_PREFIX = {"": 1.0, "g": 1e9, "t": 1e12}


def get_raw_metrics(file: str) -> tuple[dict, list[str], dict]:
    """(tree, raw metric names, file info) of a `.hatchet` file."""
    with open(file) as f:
        data = json.load(f)
    tree, info = data[0], (data[1] if len(data) > 1 else {})
    names: dict[str, None] = {}

    def walk(node: dict) -> None:
        for k in node.get("metrics", {}):
            names[k] = None
        for c in node.get("children", []):
            walk(c)

    walk(tree)
    return tree, list(names), info


def _inclusive(node: dict) -> dict[str, float]:
    """Sums of every non-time metric over the node and its subtree; the node's own time
    and count (a scope's and a kernel's time already are inclusive)."""
    total: dict[str, float] = {}
    for c in node.get("children", []):
        for k, v in _inclusive(c).items():
            total[k] = total.get(k, 0) + v
    own = node.get("metrics", {})
    for k, v in own.items():
        if k in ("time (ns)", "count"):
            continue
        total[k] = total.get(k, 0) + v
    node["_inc"] = {**total, "time (ns)": own.get("time (ns)", 0), "count": own.get("count", 0)}
    return {k: v for k, v in total.items()}


def _value(metric: str, inc: dict[str, float]) -> Optional[float]:
    t_ns = inc.get("time (ns)", 0)
    m = re.fullmatch(r"(avg_)?time/(s|ms|us|ns)", metric)
    if m:
        t = t_ns / (inc.get("count") or 1) if m.group(1) else t_ns
        return t / _TIME_UNITS[m.group(2)]
    m = re.fullmatch(r"([gt]?)(flop|byte)(\d*)/s", metric)
    if m:
        if m.group(2) == "byte":
            amount = inc.get("bytes", 0)
        elif m.group(3):
            amount = inc.get(f"flops{m.group(3)}", 0)
        else:
            amount = sum(v for k, v in inc.items() if re.fullmatch(r"flops\d*", k))
        return amount / (t_ns / 1e9) / _PREFIX[m.group(1)] if t_ns else 0.0
    for k, v in inc.items():
        if metric.lower() in (k.lower(), k.split("(")[0].strip().lower()):
            return v
    return None


def parse(metrics: list[str], filename: str, include: Optional[str] = None, exclude: Optional[str] = None,
          threshold: Optional[float] = None) -> tuple[dict, list[str]]:
    """The tree of `filename` with `metrics` computed on every node (as `node["values"]`),
    filtered by the regular expressions `include`/`exclude` on node names and by
    `threshold` (a fraction of ROOT's value of the first metric)."""
    tree, raw, _ = get_raw_metrics(filename)
    _inclusive(tree)
    names = list(metrics)
    probe = {**{k: 1.0 for k in raw}, "time (ns)": 1.0, "count": 1.0}
    for m in names:
        if _value(m, probe) is None:
            raise ValueError(f"metric {m!r} is not in {filename} (raw metrics: {', '.join(raw)}; derived: "
                             "time/ms, avg_time/ms, tflop/s, tflopN/s, gbyte/s, ...)")

    def annotate(node: dict) -> None:
        node["values"] = [_value(m, node["_inc"]) or 0.0 for m in names]
        for c in node.get("children", []):
            annotate(c)

    annotate(tree)
    top = tree["values"][0] if names else 0.0

    def keep(node: dict) -> bool:
        name = node["frame"]["name"]
        if include and not re.search(include, name) and not any(keep(c) for c in node.get("children", [])):
            return False
        if exclude and re.search(exclude, name):
            return False
        return not (threshold and names and top and node["values"][0] < threshold * top)

    def prune(node: dict) -> dict:
        node["children"] = [prune(c) for c in node.get("children", []) if keep(c)]
        return node

    return prune(tree), names


def _fmt(v: float) -> str:
    return f"{v:.3e}" if 0 < abs(v) < 1e-3 else f"{v:.3f}"


def format_tree(tree: dict, metrics: list[str], depth: int = 100) -> str:
    """The tree as text: one line per node, its metric values, then its name."""
    lines = [f"{' '.join(_fmt(v) for v in tree['values'])} {tree['frame']['name']}"]

    def walk(node: dict, prefix: str, level: int) -> None:
        kids = node.get("children", [])
        if level >= depth:
            return
        for i, c in enumerate(kids):
            last = i == len(kids) - 1
            values = " ".join(_fmt(v) for v in c["values"])
            lines.append(f"{prefix}{'└─' if last else '├─'} {values} {c['frame']['name']}")
            walk(c, prefix + ("   " if last else "│  "), level + 1)

    walk(tree, "", 0)
    lines.append("")
    lines.append("Legend: " + ", ".join(metrics) + " (inclusive)")
    return "\n".join(lines)


def print_tree(tree: dict, metrics: list[str], depth: int = 100, format: Any = None,
               print_sources: bool = False) -> None:
    print(format_tree(tree, metrics, depth))


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="proton-viewer", description="Print a .hatchet profile as a tree.")
    ap.add_argument("-m", "--metrics", default="time/ms", help="comma-separated metric names")
    ap.add_argument("-i", "--include", default=None)
    ap.add_argument("-e", "--exclude", default=None)
    ap.add_argument("-t", "--threshold", type=float, default=None)
    ap.add_argument("-d", "--depth", type=int, default=100)
    ap.add_argument("-l", "--list", action="store_true", help="list the raw metrics of the file")
    ap.add_argument("file")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(get_raw_metrics(args.file)[1]))
        return
    tree, metrics = parse(args.metrics.split(","), args.file, args.include, args.exclude, args.threshold)
    print_tree(tree, metrics, args.depth)


if __name__ == "__main__":
    main()
