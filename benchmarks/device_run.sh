#!/usr/bin/env bash
# Checks on the GPU machine, in stages that each fit one device call (600 s):
#
#   bash benchmarks/device_run.sh STAGE [STAGE...]
#
#   smoke      hand-built IR kernels vs the interpreter (benchmarks/gpu_smoke.py)
#   tests      the test suite minus the slow GPU files, GPU tests included (TESTS_PATHS)
#   tests-slow the slow GPU files: attention kernels, full-size examples, pipelined shapes
#   examples   every examples/0*.py on the GPU
#   mix        instruction mix of the benchmark matmul (sass_mix.py)
#   bench      the side-by-side benchmarks (run_gpu.py)
#   tc         the tensor-core examples' benchmark, small sizes (tc_examples_gpu.py --quick)
#   softmax    tutorial 02's grid inputs and times, Triton then tegula (softmax_occupancy.py)
#   tutorials  Triton's tutorials under Triton and tegula (needs .tutorials/ carried:
#              mkdir -p .tutorials && cp ../shared/upstream/tutorials/*.py .tutorials/);
#              TUTORIALS=02,03 picks them (default 02,03,05,06,08,09), TUTORIAL_WHO=tegula
#              runs one compiler, TUTORIAL_TIMEOUT bounds each run
#   t06        chosen cells of tutorial 06 under Triton then tegula (tutorial06_cells.py;
#              CELLS=bwd-d64-causal-4096,fwd-d128-full-16384-fp8 picks them; .tutorials/ carried)
#   t09        tutorial 09's persistent matmul kernels at one pinned config, Triton then tegula,
#              beside cuBLAS (tutorial09_cells.py; T09_SIZES=8192x8192x512,8192x8192x8192,
#              T09_CONFIG=128x256x64x3x8; .tutorials/ carried)
#   ncu09      ncu metrics (stall reasons, wgmma pipe, instruction mix) of tutorial 09's kernels
#              under tegula (NCU09_KERNELS="matmul_kernel_tma_persistent matmul_kernel_tma",
#              NCU09_SIZE, T09_CONFIG; .tutorials/ carried)
#   ncu06      ncu metrics (stall reasons, wgmma pipe, L2 bytes, launch) of one tutorial-06 kernel
#              under Triton then tegula (profile_tutorial06.py; CELL=bwd-d64-full-4096, KERNEL=_attn_bwd)
#   attention  the attention library vs Triton on the same source vs SDPA (ATTN_ARGS, commas;
#              ATTN_ARGS=--fwd-configs,128x64s3w8,128x64s3w8ws sweeps forward configs, `ws`
#              warp-specialized)
#   window     the library's sliding-window forward against its dense causal one, N8192 D128
#              (profile_attention.py --window; WINDOW=1024): the speed-up and the ideal one, per
#              config (WINDOW_CONFIGS=128x64s3w8,128x128s2w8)
#   scaling    the forward's time against N at a fixed number of programs, tegula (one pinned
#              config) vs SDPA, with the fitted fixed part per program (attention_scaling.py;
#              SCALING_CASES="128:128x128s2w8ws 128c:128x128s2w8wsol", D then c for causal)
#   autotune   the autotuned matmul example vs cuBLAS (AUTOTUNE_N, default 4096)
#   int8       int8 matmul (B column-major: wgmma on Hopper) vs Triton vs torch._int_mm
#              (int8_matmul_gpu.py; INT8_SIZES=4096,8192)
#   wsmm       the descriptor matmul plain and warp-specialized vs Triton vs cuBLAS
#              (desc_matmul_gpu.py --ws; WSMM_SIZES=4096,8192, WSMM_CONFIGS=128x256x64x3x8,...;
#              warp specialization is off by default: set TEGULA_WARP_SPECIALIZE=1)
#   wsprobe    warp-specialized kernels one per process with a timeout (ws_probe_gpu.py;
#              WSPROBE_CASES=ws,128,128,64,128,128,64,3,4,0 ... space-separated, WSPROBE_FLAGS=--sanitize)
#   upstream   Triton's own unit tests (../shared/upstream/tests) on the GPU through tegula's CUDA
#              backend, as upstream's GPU job runs them (--device=cuda, no interpreter); needs
#              .upstream/ carried: mkdir -p .upstream && cp -r ../shared/upstream/{tests,triton_shim}
#              .upstream/ (benchmarks/upstream_plugins/record_failures.py keeps each failure's report, written as it
#              happens: $OUT/upstream_failures.tgz). UPSTREAM_FILES (default language),
#              UPSTREAM_K (a -k expression), UPSTREAM_ARGS, UPSTREAM_TEST_TIMEOUT per test (120 s),
#              UPSTREAM_IDS=file.txt (relative to .upstream/tests/unit): run the node ids listed there
#   compat-pytest  pytest under `python -m tegula.compat` on PYTEST_TARGET (comma-separated
#              paths, e.g. .tutorials/06-fused-attention.py: Triton's tests of a tutorial)
#   libs       real Triton libraries' own test suites on the GPU, under `tegula.compat` (and, with
#              LIBS_WHO=tegula,triton, under Triton too): liger-kernel's test/transformers files
#              (LIBS_LIGER, space-separated) and flash-linear-attention's tests/ops files (LIBS_FLA),
#              both at once, each cut at LIBS_TIMEOUT (400 s); needs .libs/ carried (built by
#              benchmarks/prepare_libs.sh). Prints pass/fail/skip counts and the failing tests.
#   libsbench  liger-kernel's and flash-linear-attention's ops timed under Triton and under tegula
#              in one process (libs_bench.py; LIBS_OPS=rms_norm,gdn_fwd picks ops, LIBS_ROUNDS,
#              LIBS_PROFILE=1 adds per-kernel times and the tuned configs);
#              needs .libs/ carried
#   all        smoke tests examples mix bench (the old single-call run; over 600 s today)
#
#   bash benchmarks/device_run.sh --gpus "GROUP" "GROUP" ...
#
# runs each GROUP on its own GPU at the same time (GPU i for the i-th group; for a
# machine of several GPUs, so that one device call does the work of several). A GROUP
# is "[VAR=value ...] STAGE [STAGE...]", e.g. "TUTORIALS=03,06 TUTORIAL_TIMEOUT=270
# tutorials" (values without spaces: lists take commas). Each group is cut at GROUP_TIMEOUT seconds (570), its logs are packed
# into $OUT/logs.tgz (the device tool returns at most 8 files), and each group's
# short results are printed last, one group after the other.
#
# Logs go to $OUT (or /tmp/tegula-device); each stage prints its short result last.
set -u
OUT=${OUT:-/tmp/tegula-device}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export TEGULA_CACHE_DIR=${TEGULA_CACHE_DIR:-$(mktemp -d)}
JOBS=${JOBS:-14}
WSMM_SIZES=${WSMM_SIZES:-4096,8192}
WINDOW_CONFIGS=${WINDOW_CONFIGS:-128x64s3w8}
WSMM_CONFIGS=${WSMM_CONFIGS:-128x256x64x3x8,128x128x64x4x4}
LIBS_WHO=${LIBS_WHO:-tegula}
TESTS_PATHS=${TESTS_PATHS:-tests}  # the tests stage's paths (comma-separated: one half of the suite per GPU)
SLOW="tests/e2e/test_attention_kernels.py tests/e2e/test_examples.py tests/e2e/test_pipelined_shapes.py"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton, llvmlite, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)" | tee -a "$OUT/env.txt"

stage() {
  case "$1" in
  smoke)
    timeout 240 python3 benchmarks/gpu_smoke.py "$OUT/gpu_smoke.log" > "$OUT/gpu_smoke.out" 2>&1
    echo "gpu_smoke exit $?"; tail -n 25 "$OUT/gpu_smoke.out" ;;
  tests)
    local ignore=""; for f in $SLOW; do ignore="$ignore --ignore=$f"; done
    timeout "${TESTS_TIMEOUT:-540}" python3 -m pytest -q -n "$JOBS" -p no:cacheprovider --durations=15 $ignore \
      ${TESTS_PATHS//,/ } > "$OUT/tests.log" 2>&1
    echo "pytest exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -30; tail -n 25 "$OUT/tests.log" ;;
  tests-slow)
    timeout "${TESTS_TIMEOUT:-540}" python3 -m pytest -q -n "$JOBS" -p no:cacheprovider --durations=15 $SLOW > "$OUT/tests_slow.log" 2>&1
    echo "pytest (slow files) exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/tests_slow.log" | head -30; tail -n 20 "$OUT/tests_slow.log" ;;
  examples)
    for e in examples/0*.py examples/1*.py; do
      [ -f "$e" ] || continue
      timeout 300 python3 "$e" > "$OUT/$(basename "$e" .py).log" 2>&1; echo "$e exit $?"; tail -n 3 "$OUT/$(basename "$e" .py).log"
    done ;;
  mix)
    timeout 300 python3 benchmarks/sass_mix.py 2>&1 | tee "$OUT/sass_mix.log" | tail -n 5 ;;
  bench)
    python3 benchmarks/run_gpu.py --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -n 40 ;;
  tc)
    timeout 300 python3 benchmarks/tc_examples_gpu.py --quick 2>&1 | tee "$OUT/tc_examples.log" | tail -n 20 ;;
  softmax)
    timeout 120 python3 benchmarks/softmax_occupancy.py 2>&1 | tee "$OUT/softmax_triton.log" | tail -n 12
    timeout 180 python3 -m tegula.compat benchmarks/softmax_occupancy.py 2>&1 | tee "$OUT/softmax_tegula.log" | tail -n 12 ;;
  tutorials)
    local only=${TUTORIALS:-02,03,05,06,08,09} who=${TUTORIAL_WHO:-triton,tegula}
    timeout "${TUTORIALS_TIMEOUT:-560}" python3 benchmarks/tutorials_gpu.py .tutorials --only ${only//,/ } \
      --who ${who//,/ } --timeout "${TUTORIAL_TIMEOUT:-150}" --out "$OUT" 2>&1 | tee "$OUT/tutorials.log" | tail -n 60 ;;
  t06)
    local cells=${CELLS:+--cells ${CELLS//,/ }}
    timeout "${T06_TIMEOUT:-270}" python3 benchmarks/tutorial06_cells.py .tutorials/06-fused-attention.py $cells 2>&1 | tee "$OUT/t06_triton.log" | grep -v Warning
    timeout "${T06_TIMEOUT:-270}" python3 -m tegula.compat benchmarks/tutorial06_cells.py .tutorials/06-fused-attention.py $cells 2>&1 | tee "$OUT/t06_tegula.log" | grep -v Warning ;;
  t09)
    local sizes=${T09_SIZES:-8192x8192x512,8192x8192x8192}
    for py in "python3" "python3 -m tegula.compat"; do
      timeout "${T09_TIMEOUT:-240}" $py benchmarks/tutorial09_cells.py .tutorials/09-persistent-matmul.py \
        --sizes ${sizes//,/ } --config "${T09_CONFIG:-128x256x64x3x8}" ${T09_DTYPE:+--dtype $T09_DTYPE} 2>&1 \
        | tee -a "$OUT/t09.log" | grep -v Warning
    done ;;
  ncu09)
    local M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.max,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,gpu__time_duration.sum"
    for k in ${NCU09_KERNELS:-matmul_kernel_tma_persistent matmul_kernel_tma}; do
      timeout "${NCU_TIMEOUT:-200}" ncu --kernel-name "regex:^$k\$" --launch-count 1 --metrics "$M,sass__inst_executed_per_opcode" \
        --print-metric-instances values python3 -m tegula.compat benchmarks/tutorial09_cells.py .tutorials/09-persistent-matmul.py \
        --sizes "${NCU09_SIZE:-8192x8192x8192}" --config "${T09_CONFIG:-128x256x64x3x8}" --only ${k#matmul_kernel_} \
        > "$OUT/ncu09_$k.txt" 2>&1
      echo "== ncu tegula $k exit $?"
      grep -E "stalled|inst_executed|cycles|gmma|launch__|duration" "$OUT/ncu09_$k.txt" \
        | awk '$NF+0 > 0.05 || /inst|cycles|launch|duration/' | cut -c1-600 | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
    done ;;
  ncu06)
    local M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.max,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,gpu__time_duration.sum"
    for who in triton tegula; do
      local py="python3"; [ "$who" = tegula ] && py="python3 -m tegula.compat"
      timeout "${NCU_TIMEOUT:-240}" ncu --profile-from-start off --kernel-name "regex:${KERNEL:-^_attn_bwd\$}" --launch-count 1 \
        --metrics "$M,sass__inst_executed_per_opcode" --print-metric-instances values $py benchmarks/profile_tutorial06.py .tutorials/06-fused-attention.py "${CELL:-bwd-d64-full-4096}" \
        > "$OUT/ncu06_$who.txt" 2>&1
      echo "== ncu $who ${CELL:-bwd-d64-full-4096} exit $?"
      grep -E "stalled|inst_executed|cycles|gmma|lts__t_bytes|launch__|duration|profiled" "$OUT/ncu06_$who.txt" \
        | awk '$NF+0 > 0.05 || /inst|cycles|launch|duration|bytes|profiled/' | cut -c1-400 | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
    done ;;
  upstream)
    [ -d .upstream/tests/unit ] || { echo "upstream: carry .upstream/ (see the header)"; return; }
    export UPSTREAM_FAIL_DIR=$OUT/upstream_failures
    (cd .upstream/tests/unit && PYTHONPATH=$PWD/../../triton_shim:$PWD/../../../benchmarks/upstream_plugins:$PYTHONPATH \
      timeout "${UPSTREAM_TIMEOUT:-540}" python3 -c 'import sys, pytest; sys.exit(pytest.main(sys.argv[1:]
        + ([i for i in open(sys.argv.pop()).read().split("\n") if i] if sys.argv[-1].endswith(".txt") else [])))' \
      -v --tb=short -n "$JOBS" -p no:cacheprovider -p record_failures --timeout "${UPSTREAM_TEST_TIMEOUT:-120}" --device=cuda \
      ${UPSTREAM_K:+-k "$UPSTREAM_K"} ${UPSTREAM_ARGS:-} ${UPSTREAM_IDS:-${UPSTREAM_FILES:-language}} > "$OUT/upstream.log" 2>&1)
    echo "upstream exit $?"
    grep -oE "(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) " "$OUT/upstream.log" | sort | uniq -c
    grep -E "^(FAILED|ERROR) " "$OUT/upstream.log" | sed 's/ - .*//' | sed -E 's/\[.*//' | sort | uniq -c | sort -rn | head -40
    tail -n 3 "$OUT/upstream.log"
    [ -d "$UPSTREAM_FAIL_DIR" ] && tar czf "$OUT/upstream_failures.tgz" -C "$OUT" upstream_failures && rm -r "$UPSTREAM_FAIL_DIR" ;;
  attention)
    timeout "${ATTN_TIMEOUT:-400}" python3 benchmarks/attention_bench.py ${ATTN_ARGS:+${ATTN_ARGS//,/ }} 2>&1 | tee "$OUT/attention.log" | tail -n 45 ;;
  window)
    local config
    for config in ${WINDOW_CONFIGS//,/ }; do
      echo "config $config"
      timeout "${WINDOW_TIMEOUT:-200}" python3 benchmarks/profile_attention.py --z 2 --n 8192 --d 128 \
        --window "${WINDOW:-1024}" --config "$config" 2>&1 | tee -a "$OUT/window.log" | grep -v Warning | tail -n 5
    done ;;
  int8)
    local sizes=${INT8_SIZES:-4096,8192}
    timeout "${INT8_TIMEOUT:-300}" python3 benchmarks/int8_matmul_gpu.py --sizes ${sizes//,/ } 2>&1 \
      | tee "$OUT/int8.log" | tail -n 8 ;;
  scaling)
    local case
    for case in ${SCALING_CASES:-128:128x128s2w8ws 128c:128x128s2w8wsol 64:128x64s3w8 64c:128x64s3w8}; do
      local d=${case%%:*} causal=""; [ "${d%c}" != "$d" ] && causal=--causal
      timeout "${SCALING_TIMEOUT:-150}" python3 benchmarks/attention_scaling.py --d "${d%c}" $causal \
        --config "${case#*:}" 2>&1 | tee -a "$OUT/scaling.log" | grep -v Warning | tail -n 9
    done ;;
  autotune)
    timeout 300 python3 benchmarks/autotune_matmul.py ${AUTOTUNE_N:-4096} 2>&1 | tee "$OUT/autotune.log" | tail -n 12 ;;
  wsprobe)
    timeout "${WSPROBE_TIMEOUT:-400}" python3 benchmarks/ws_probe_gpu.py ${WSPROBE_FLAGS:-} ${WSPROBE_CASES:-\
      ws,128,128,64,128,128,64,3,4,0 ws,128,128,64,128,128,64,3,4,1 ws,1024,1024,1024,128,256,64,3,8,0 \
      ws,1024,1024,1024,128,256,64,3,8,1 desc,1024,1024,1024,128,256,64,3,8} 2>&1 | tee "$OUT/wsprobe.log" ;;
  wsmm)
    for cfg in ${WSMM_CONFIGS//,/ }; do
      timeout "${WSMM_TIMEOUT:-200}" python3 benchmarks/desc_matmul_gpu.py --ws --sizes ${WSMM_SIZES//,/ } \
        --config ${cfg//x/ } 2>&1 | tee -a "$OUT/wsmm.log" | grep -v Warning
    done ;;
  compat-pytest)
    timeout "${PYTEST_TIMEOUT:-300}" python3 -m tegula.compat -m pytest -q -p no:cacheprovider ${PYTEST_TARGET//,/ } \
      > "$OUT/compat_pytest.log" 2>&1
    echo "compat pytest exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/compat_pytest.log" | head -20; tail -n 5 "$OUT/compat_pytest.log" ;;
  libs)
    local who liger_files="" fla_files=""
    for f in ${LIBS_LIGER:-test_rms_norm.py test_layer_norm.py test_swiglu.py test_geglu.py test_rope.py test_cross_entropy.py test_fused_linear_cross_entropy.py test_kl_div.py test_jsd.py test_group_norm.py test_softmax.py test_dyt.py test_tvd.py test_sparsemax.py test_poly_norm.py test_fused_add_rms_norm.py test_qwen2vl_mrope.py test_embedding.py test_multi_token_attention.py test_relu_squared.py test_fused_linear_jsd.py test_llama4_rope.py test_mm_int8int2.py test_grpo_loss.py test_fused_neighborhood_attention.py}; do
      liger_files="$liger_files test/transformers/$f"; done
    for f in ${LIBS_FLA:-ops/utils ops/test_gla.py ops/test_simple_gla.py ops/test_delta.py ops/test_gdn.py ops/test_retention.py ops/test_linear_attn.py ops/test_based.py ops/test_hgrn.py ops/test_rwkv6.py ops/test_rwkv7.py ops/test_solve_tril.py ops/test_kda.py ops/test_attn.py}; do
      fla_files="$fla_files tests/$f"; done
    for who in ${LIBS_WHO//,/ }; do
      local run="python3 -m tegula.compat -m pytest"; [ "$who" = triton ] && run="python3 -m pytest"
      [ -d .libs/liger ] && (cd .libs/liger && PYTHONPATH=$PWD/../..:$PWD/src:$PWD/../site timeout "${LIBS_TIMEOUT:-400}" \
        $run -v -p no:cacheprovider -n "${LIBS_JOBS:-6}" $liger_files > "$OUT/liger_$who.log" 2>&1; echo "exit $?" >> "$OUT/liger_$who.log") &
      [ -d .libs/fla ] && (cd .libs/fla && PYTHONPATH=$PWD/../..:$PWD:$PWD/../site timeout "${LIBS_TIMEOUT:-400}" \
        $run -v -p no:cacheprovider -n "${LIBS_JOBS:-8}" $fla_files > "$OUT/fla_$who.log" 2>&1; echo "exit $?" >> "$OUT/fla_$who.log") &
      wait
      for f in "$OUT/liger_$who.log" "$OUT/fla_$who.log"; do
        [ -f "$f" ] || continue
        echo "== $(basename "$f" .log): $(tail -n 1 "$f"), passed $(grep -c ' PASSED' "$f"), failed $(grep -c ' FAILED' "$f"), skipped $(grep -c ' SKIPPED' "$f"), errors $(grep -c ' ERROR' "$f")"
        grep -E " (FAILED|ERROR) " "$f" | sed -E 's/.*(FAILED|ERROR) //; s/ - .*//' | sort -u | head -30
      done
    done ;;
  libsbench)
    python3 benchmarks/libs_bench.py --only "${LIBS_OPS:-}" --rounds "${LIBS_ROUNDS:-5}" --out "$OUT" ${LIBS_PROFILE:+--profile} ;;
  all)
    for s in smoke tests tests-slow examples mix bench; do stage "$s"; done ;;
  *) echo "unknown stage $1"; exit 2 ;;
  esac
}

on_gpus() {
  local i=0 g w
  mkdir -p "$OUT/work"
  for g in "$@"; do
    local envs=() stages=()
    for w in $g; do case "$w" in *=*) envs+=("$w") ;; *) stages+=("$w") ;; esac; done
    # each group keeps its own compile cache: unset, the child makes a fresh one
    (env -u TEGULA_CACHE_DIR CUDA_VISIBLE_DEVICES="$i" OUT="$OUT/work/gpu$i" "${envs[@]}" \
       timeout "${GROUP_TIMEOUT:-570}" bash "$0" "${stages[@]}" > "$OUT/work/gpu$i.txt" 2>&1) &
    i=$((i + 1))
  done
  wait
  i=0
  for g in "$@"; do
    echo "==== GPU $i: $g"; tail -n "${GROUP_TAIL:-60}" "$OUT/work/gpu$i.txt"; i=$((i + 1))
  done
  tar czf "$OUT/logs.tgz" -C "$OUT" work && rm -rf "$OUT/work"
}

if [ "${1:-}" = "--gpus" ]; then shift; on_gpus "$@"; exit 0; fi
for s in "${@:-all}"; do echo "== $s"; stage "$s"; done
