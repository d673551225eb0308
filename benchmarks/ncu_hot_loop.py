"""The hottest loop of a kernel, instruction by instruction, from ncu's source page:
each SASS instruction of the most executed block with its warp-stall samples and the
reasons behind most of them. Two kernels compiled from the same source (tegula's and
Triton's) side by side this way show where one loses cycles the other does not: the
128x128x64 8-warp matmul's in-place updates of cp.async address registers, stalled on
the long scoreboard until the copy had read them (performance.md, session 25).

    ncu -f -o rep --kernel-name regex:matmul --launch-skip 2 --launch-count 1 \\
        --section SourceCounters python3 benchmarks/profile_matmul.py tegula 4096 float16 128,128,64,4,8
    ncu -i rep.ncu-rep --page source --print-source sass --csv > src.csv
    python3 benchmarks/ncu_hot_loop.py src.csv
"""
from __future__ import annotations

import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def hot_loop(path: str, reasons: int = 3, floor: int = 60) -> list[str]:
    rows = list(csv.reader(open(path)))
    header = next(i for i, r in enumerate(rows) if SAMPLES in r)
    names, data = rows[header], [r for r in rows[header + 1:] if len(r) == len(rows[header])]
    samples, executed = names.index(SAMPLES), names.index(EXECUTED)
    stalls = [j for j, n in enumerate(names) if n.startswith("stall_") and "Not Issued" not in n]
    most = max(int(r[executed]) for r in data)
    loop = [r for r in data if int(r[executed]) == most]
    total = sum(int(r[samples]) for r in data)
    out = [f"{path}: {total} samples, loop of {len(loop)} instructions executed {most} times, "
           f"{sum(int(r[samples]) for r in loop)} samples in it"]
    for r in loop:
        why = sorted(((int(r[j]), names[j][len("stall_"):]) for j in stalls if r[j].isdigit() and int(r[j]) > floor),
                     reverse=True)[:reasons]
        out.append(f"{r[0][-4:]} {int(r[samples]):6d}  {r[1].strip()[:64]:64s} " + " ".join(f"{n}={v}" for v, n in why))
    return out


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print("\n".join(hot_loop(p)))
