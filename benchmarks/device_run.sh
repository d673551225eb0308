#!/usr/bin/env bash
# One call on the GPU machine: the whole test suite (GPU tests run there), the GPU
# smoke cases, the examples at full size, and the side-by-side benchmarks.
# Usage (device tool, from the repository root):  bash benchmarks/device_run.sh
# Logs go to $OUT (or /tmp/tegula-device), the table is printed last.
set -u
OUT=${OUT:-/tmp/tegula-device}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export TEGULA_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton, llvmlite, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)" | tee -a "$OUT/env.txt"

echo "== GPU smoke cases (hand-built IR kernels vs the interpreter)"
timeout 240 python3 benchmarks/gpu_smoke.py "$OUT/gpu_smoke.log" > "$OUT/gpu_smoke.out" 2>&1
echo "gpu_smoke exit $?"; tail -n 25 "$OUT/gpu_smoke.out"

echo "== test suite (GPU tests included)"
python3 -m pytest -q -n 8 -p no:cacheprovider tests > "$OUT/tests.log" 2>&1
echo "pytest exit $?"; tail -n 15 "$OUT/tests.log"

echo "== examples on the GPU"
for e in examples/0*.py; do
  timeout 300 python3 "$e" > "$OUT/$(basename "$e" .py).log" 2>&1; echo "$e exit $?"; tail -n 3 "$OUT/$(basename "$e" .py).log"
done

echo "== instruction mix of the benchmark matmul (tegula sm_80 / sm_90a, Triton on this GPU)"
timeout 300 python3 benchmarks/sass_mix.py 2>&1 | tee "$OUT/sass_mix.log" | tail -n 5

[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
echo "== benchmarks"
python3 benchmarks/run_gpu.py --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -n 40
