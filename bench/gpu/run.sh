#!/usr/bin/env bash
# The measurements a lent GPU should make, in one go (docs/gpu_testing.md):
# the GPU-only tests, then the rows that calibrate the emulated GPU's clock
# through tiny and through PyTorch beside it, then the training steps.
#
#   bench/gpu/run.sh [OUT_DIR]       (default build/gpu-run; BUILD_DIR, default build/default)
#
# It needs a build with CUDA (`./workbook test --gpu` makes one and runs the
# tests; on another architecture than 80 configure with
# -DCMAKE_CUDA_ARCHITECTURES=90 first) and, for the peer rows, python3 with
# torch. Every step runs even when one fails; the exit status is 1 if any did.
# Then, on any machine: bench/gpu/collect.py OUT_DIR writes data/gpu_measurements/.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR=${BUILD_DIR:-$ROOT/build/default}
OUT=${1:-$ROOT/build/gpu-run}
mkdir -p "$OUT"
status=0
step() {  # step NAME COMMAND...: runs, logs to OUT/log.txt, remembers a failure
  local name=$1; shift
  echo "== $name ($(date -u +%H:%M:%S))" | tee -a "$OUT/log.txt"
  "$@" 2>&1 | tee -a "$OUT/log.txt"
  local rc=${PIPESTATUS[0]}
  [[ $rc -eq 0 ]] || { echo "!! $name failed with $rc" | tee -a "$OUT/log.txt"; status=1; }
}
unset TINY_FORCE_EMULATED_GPU

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,pcie.link.gen.max,pcie.link.width.max --format=csv
  nvcc --version | tail -2
  nproc
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

step "GPU-only tests (ctest -L gpu)" ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure -j 4 --timeout 120
bench() {  # bench PROGRAM FILE [args]: a Google Benchmark program, JSON to OUT/FILE
  local program=$1 file=$2; shift 2
  "$BUILD_DIR/bench/$program" --benchmark_out="$OUT/$file" --benchmark_out_format=json "$@"
}
step "calibration rows through tiny" bench bench_calibration calibration.json \
  --benchmark_repetitions=5 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=false
step "training steps and AMP steps through tiny" bench bench_training_step steps.json \
  --benchmark_filter='TinyStepCuda' --benchmark_repetitions=5
step "AMP steps through tiny" bench bench_half amp.json --benchmark_filter='AmpStep' --benchmark_repetitions=5
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  step "calibration rows through PyTorch" python3 "$ROOT/bench/peers/bench_torch_calibration.py" \
    --out "$OUT/torch_calibration.json"
else
  echo "== PyTorch with CUDA not found: its peer rows are skipped" | tee -a "$OUT/log.txt"
fi
exit $status
