#!/usr/bin/env bash
# The one command a lent GPU machine runs (docs/gpu_testing.md), after
# bench/gpu/pack.sh made .gpu/ here and the device tool carried it there:
#
#   bench/gpu/on_device.sh OUT_DIR                (everything below: about 5 minutes on an H200)
#   bench/gpu/on_device.sh OUT_DIR --tests-only   (ctest -L gpu and the memcheck only: about a
#                                                  minute, for a session with little device time left)
#
# It unpacks the build, then runs bench/gpu/run.sh (the GPU-only tests, the
# calibration rows through tiny and PyTorch, the training and AMP steps), the
# new kernels under compute-sanitizer, the kernels each calibration case
# launches (bench/gpu/kernel_choices.cpp), lessons 2, 4 and 7's demos and
# train_mlp's profiled steps on the real GPU. It writes into OUT_DIR:
# machine.txt, log.txt, calibration.json, steps.json, amp.json,
# torch_calibration.json, sanitizer.txt, kernel_choices.jsonl, demos.txt and
# train_mlp_trace.json/.html: more than the device tool brings back (eight
# files), so tar OUT_DIR into its $OUT.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR=${1:?usage: bench/gpu/on_device.sh OUT_DIR [--tests-only]}
tests_only=0
case ${2:-} in
  "") ;;
  --tests-only) tests_only=1 ;;
  *) echo "on_device.sh: unknown option '$2' (the one option is --tests-only)" >&2; exit 2 ;;
esac
cd "$ROOT"
[[ -f .gpu/pack.tar.xz && -f .gpu/libs.tar.xz ]] || { echo "on_device.sh: no .gpu/: run bench/gpu/pack.sh here first" >&2; exit 1; }
tar xJf .gpu/pack.tar.xz && mkdir -p /tmp/tiny-libs && tar xJf .gpu/libs.tar.xz -C /tmp/tiny-libs || exit 1
export LD_LIBRARY_PATH=/tmp/tiny-libs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BUILD=$ROOT/build/default
mkdir -p "$OUT_DIR"
status=0
if [[ $tests_only == 1 ]]; then
  unset TINY_FORCE_EMULATED_GPU
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; date -u +%Y-%m-%dT%H:%M:%SZ; } >"$OUT_DIR/machine.txt" 2>&1
  ctest --test-dir "$BUILD" -L gpu --output-on-failure -j 4 --timeout 120 >"$OUT_DIR/log.txt" 2>&1 || status=1
  tail -4 "$OUT_DIR/log.txt"
else
  bench/gpu/run.sh "$OUT_DIR" || status=1
fi

# The kernels added since the last run on a GPU, under memcheck (MEMCHECK_FILTER: a gtest filter).
{
  echo "== compute-sanitizer memcheck ($(date -u +%H:%M:%S))"
  timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/tiny_gpu_tests" \
    --gtest_filter="${MEMCHECK_FILTER:-CudaBackend.SelectSort*:CudaBackend.MathAndIndexing*:CudaBackend.Reductions*}"
  echo "exit status $?"
} >"$OUT_DIR/sanitizer.txt" 2>&1 || true
tail -3 "$OUT_DIR/sanitizer.txt"
grep -q '^exit status 0$' "$OUT_DIR/sanitizer.txt" || status=1

[[ $tests_only == 1 ]] && exit $status
echo "== kernel choices ($(date -u +%H:%M:%S))" | tee -a "$OUT_DIR/log.txt"
timeout 120 "$BUILD/bench/kernel_choices" "$OUT_DIR/kernel_choices.jsonl" 2>&1 | tee -a "$OUT_DIR/log.txt" || status=1
# The demos, on the real GPU, for the figures the lessons quote.
{
  for demo in "tests/lessons/solution_2_demo" "tests/lessons/solution_4_demo --dataset digits --epochs 5" \
              "tests/lessons/solution_7_demo" \
              "framework/examples/train_mlp --dataset digits --epochs 1 --device cuda --profile $OUT_DIR/train_mlp_trace.json"; do
    echo "== $demo ($(date -u +%H:%M:%S))"
    # shellcheck disable=SC2086
    timeout 120 "$BUILD/"$demo
    echo "exit status $?"
  done
} >"$OUT_DIR/demos.txt" 2>&1
grep -c '^exit status 0$' "$OUT_DIR/demos.txt" | grep -qx 4 || status=1
grep -E '^(==|exit status|!!)' "$OUT_DIR/log.txt" "$OUT_DIR/demos.txt"
exit $status
