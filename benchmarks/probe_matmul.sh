# Diagnostics for one matmul config on the GPU machine: SASS of tegula and Triton,
# per-reason warp stall metrics from ncu for both, and their hottest loops instruction by
# instruction with the stall reasons (ncu_hot_loop.py; logs under $OUT).
#   bash benchmarks/probe_matmul.sh SIZE BM,BN,BK,STAGES,WARPS
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export TEGULA_CACHE_DIR=$(mktemp -d)
SIZE=${1:-4096}; CFG=${2:-128,128,64,4,4}
python3 benchmarks/sass_mix.py --config ${CFG//,/ } --dump $OUT/sass 2>&1 | tail -n 4
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.max,smsp__cycles_active.avg"
for who in tegula triton; do
  timeout 180 ncu --kernel-name regex:matmul --launch-skip 2 --launch-count 1 --metrics "$M" \
    python3 benchmarks/profile_matmul.py $who $SIZE float16 $CFG > $OUT/ncu_${who}_$SIZE.txt 2>&1
  echo "ncu $who exit $?"
  grep -E "stalled|inst_executed|cycles" $OUT/ncu_${who}_$SIZE.txt | awk '$NF+0 > 0.05 || /inst|cycles/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
done
# the hottest loop instruction by instruction, with its stall reasons (ncu_hot_loop.py)
for who in tegula triton; do
  timeout 180 ncu -f -o $OUT/rep_$who --kernel-name regex:matmul --launch-skip 2 --launch-count 1 \
    --section SourceCounters python3 benchmarks/profile_matmul.py $who $SIZE float16 $CFG > /dev/null 2>&1
  ncu -i $OUT/rep_$who.ncu-rep --page source --print-source sass --csv > $OUT/source_$who.csv 2>&1
  rm -f $OUT/rep_$who.ncu-rep
done
python3 benchmarks/ncu_hot_loop.py $OUT/source_tegula.csv $OUT/source_triton.csv > $OUT/hot_loop.txt
grep "samples, loop" $OUT/hot_loop.txt
