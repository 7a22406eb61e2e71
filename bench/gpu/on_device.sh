#!/usr/bin/env bash
# The one command a lent GPU machine runs (docs/gpu_testing.md), after
# bench/gpu/pack.sh made .gpu/ here and the device tool carried it there:
#
#   bench/gpu/on_device.sh OUT_DIR
#
# It unpacks the build, then runs bench/gpu/run.sh (the GPU-only tests, the
# calibration rows through tiny and PyTorch, the training and AMP steps), the
# new kernels under compute-sanitizer, and lessons 2, 4 and 7's demos on the
# real GPU. It writes at most eight files into OUT_DIR (the device tool brings
# back eight): machine.txt, log.txt, calibration.json, steps.json, amp.json,
# torch_calibration.json, sanitizer.txt and demos.txt.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR=${1:?usage: bench/gpu/on_device.sh OUT_DIR}
cd "$ROOT"
[[ -f .gpu/pack.tar.xz && -f .gpu/libs.tar.xz ]] || { echo "on_device.sh: no .gpu/: run bench/gpu/pack.sh here first" >&2; exit 1; }
tar xJf .gpu/pack.tar.xz && mkdir -p /tmp/tiny-libs && tar xJf .gpu/libs.tar.xz -C /tmp/tiny-libs || exit 1
export LD_LIBRARY_PATH=/tmp/tiny-libs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BUILD=$ROOT/build/default
mkdir -p "$OUT_DIR"
status=0
bench/gpu/run.sh "$OUT_DIR" || status=1

# The kernels added since the last run on a GPU, under memcheck.
{
  echo "== compute-sanitizer memcheck ($(date -u +%H:%M:%S))"
  timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/tiny_gpu_tests" \
    --gtest_filter='CudaBackend.Conv2d*:CudaBackend.Pooling*:CudaBackend.BatchNorm*:CudaBackend.Cnn*:MatmulPrecision.*'
  echo "exit status $?"
} >"$OUT_DIR/sanitizer.txt" 2>&1 || true
tail -3 "$OUT_DIR/sanitizer.txt"
grep -q '^exit status 0$' "$OUT_DIR/sanitizer.txt" || status=1

# The demos, on the real GPU, for the figures the lessons quote.
{
  for demo in "solution_2_demo" "solution_4_demo --dataset digits --epochs 5" "solution_7_demo"; do
    echo "== $demo ($(date -u +%H:%M:%S))"
    # shellcheck disable=SC2086
    timeout 120 "$BUILD/tests/lessons/"$demo
    echo "exit status $?"
  done
} >"$OUT_DIR/demos.txt" 2>&1
grep -c '^exit status 0$' "$OUT_DIR/demos.txt" | grep -qx 3 || status=1
grep -E '^(==|exit status|!!)' "$OUT_DIR/log.txt" "$OUT_DIR/demos.txt"
exit $status
