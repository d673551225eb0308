set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export TEGULA_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 benchmarks/run_gpu.py --only matmul --rounds 3 --out $OUT --matmul \
  3000:float16:128,128,64,4,4 3072:float16:128,128,64,4,4 4096:float16:128,128,64,4,4 \
  3000:float16:128,256,64,3,8 3072:float16:128,256,64,3,8 4096:float16:128,256,64,3,8 > $OUT/sweep.log 2>&1
echo sweep exit $?
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
for spec in "tegula 3000 128,128,64,4,4" "tegula 3072 128,128,64,4,4" "triton 3072 128,128,64,4,4" "tegula 4096 128,256,64,3,8" "triton 4096 128,256,64,3,8"; do
  set -- $spec
  timeout 120 ncu --kernel-name regex:matmul --launch-skip 2 --launch-count 1 $S python3 benchmarks/profile_matmul.py $1 $2 float16 $3 > $OUT/ncu_$1_$2.txt 2>&1
  echo ncu $spec exit $?
done
tail -n 12 $OUT/sweep.log
