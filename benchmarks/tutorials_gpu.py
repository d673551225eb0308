"""Triton's official tutorials, unmodified, under the real Triton and under tegula
(`python -m tegula.compat`), one after the other on the same GPU, each in a fresh
process with its own timeout; their printed benchmark tables kept side by side.

    python benchmarks/tutorials_gpu.py DIR [--only 01 03] [--timeout 150] [--out OUT]

DIR holds Triton's tutorial files (release/3.6.x `python/tutorials`). For each tutorial
and each of `triton` / `tegula`, the full output goes to `OUT/<tutorial>.<who>.log`; the
summary printed last gives the exit status (0, an exception's last line, or "timeout:
cut while benchmarking") and tegula's speed relative to Triton's over the cells of the
tables both printed (value ratios, inverted for columns measured in time).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(path: Path, who: str, timeout: int, out: Path) -> tuple[str, str]:
    cmd = [sys.executable, str(path)] if who == "triton" else [sys.executable, "-m", "tegula.compat", str(path)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    if who == "tegula":
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as cwd:  # tutorials save plots/CSVs to '.'
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
            text, status = p.stdout + p.stderr, str(p.returncode)
            if p.returncode:
                last = [ln for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
                status = last[-1][:160] if last else status
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            text += (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            status = f"timeout after {timeout}s"
    (out / f"{path.stem}.{who}.log").write_text(text)
    return status, text


_NUMBER = re.compile(r"^[-+]?[0-9.]+(e[-+]?[0-9]+)?$", re.I)


def tables(text: str) -> dict[tuple[str, float, str], float]:
    """The perf_report tables a tutorial printed (a name line ending in ':', a header
    row, then rows of numbers): (table, first column's value, column) -> value."""
    found: dict[tuple[str, float, str], float] = {}
    name, header = "", None
    for line in text.splitlines():
        if line.rstrip().endswith(":") and not line.startswith(" "):
            name, header = line.strip().rstrip(":"), None
            continue
        if not name or not line.strip():
            continue
        if header is None:
            # labels are separated by two or more spaces ("Naive Softmax" is one; Triton's
            # "Triton (GB/s)" carries its unit)
            # a column measured in time ("(runtime(ms))", "(ms)") keeps a "time:" prefix,
            # so that the summary compares speeds, not raw values
            header = [("time:" if re.search(r"\((?:runtime)?\(?(?:ms|us|s)\)", c) else "")
                      + re.sub(r"\s*\(.*\)$", "", c) for c in re.split(r"\s{2,}", line.strip())]
            continue
        cells = line.split()
        if cells[0].isdigit() and len(cells) >= 3 and all(_NUMBER.match(c) for c in cells[1:]):
            values = cells[1:]
            cols = header[-len(values):] if len(header) >= len(values) else [str(i) for i in range(len(values))]
            for col, v in zip(cols, values):
                found[(name, float(cells[1]), col)] = float(v)
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--who", nargs="*", default=["triton", "tegula"])
    ap.add_argument("--timeout", type=int, default=150)
    ap.add_argument("--out", default=os.environ.get("OUT", tempfile.gettempdir()))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(Path(a.dir).resolve().glob("[0-9][0-9]-*.py"))
    if a.only:
        files = [f for f in files if f.name[:2] in a.only]
    summary = []
    for f in files:
        results = {who: run(f, who, a.timeout, out) for who in a.who}
        row = [f.stem] + [f"{who}: {results[who][0]}" for who in a.who]
        if "triton" in results and "tegula" in results:
            tr, tg = tables(results["triton"][1]), tables(results["tegula"][1])
            # the compiler's own column(s) ("Triton", "triton", ...), not torch's or cuBLAS'
            # tegula's speed over Triton's: value ratio, inverted for time columns
            ratios = [(tr[k] / tg[k] if k[2].startswith("time:") else tg[k] / tr[k])
                      for k in tr if k in tg and "riton" in k[2] and tr[k] > 0 and tg[k] > 0]
            if ratios:
                ratios.sort()
                row.append(f"tegula/triton over {len(ratios)} cells: median {ratios[len(ratios) // 2]:.2f} "
                           f"(min {ratios[0]:.2f}, max {ratios[-1]:.2f})")
        summary.append(" | ".join(row))
        print(summary[-1], flush=True)
    (out / "tutorials_summary.txt").write_text("\n".join(summary) + "\n")
    print("\n== summary")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
