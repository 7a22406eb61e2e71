#!/usr/bin/env bash
# tiny's conv2d beside PyTorch's on this CPU, one run each, same shapes
# (bench/conv_cases.h) and threads, and their ratio:
#
#   bench/compare_conv.sh [--threads N] [--min-time S] [--repetitions N]   (defaults 2, 0.5, 3)
#
# Needs tiny's build (build/default, or BUILD_DIR=...) with bench_conv, and
# Debian's python3-torch (/usr/bin/python3). Prints a markdown table.
set -euo pipefail
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build/default}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=2 MIN_TIME=0.5 REPS=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --min-time) MIN_TIME=$2; shift 2 ;;
    --repetitions) REPS=$2; shift 2 ;;
    *) echo "compare_conv: unknown option $1 (use --threads, --min-time, --repetitions)" >&2; exit 2 ;;
  esac
done
[[ -x "$BUILD_DIR/bench/bench_conv" ]] || { echo "compare_conv: $BUILD_DIR/bench/bench_conv not found: cmake --build --preset default --target bench_conv" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TINY_NUM_THREADS=$THREADS "$BUILD_DIR/bench/bench_conv" --benchmark_min_time="$MIN_TIME" \
  --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/tiny.json"
"$PYTHON" bench/peers/bench_torch_conv.py --threads "$THREADS" --min-time "$MIN_TIME" --repetitions "$REPS" >"$tmp/torch.jsonl"
"$PYTHON" - "$tmp/tiny.json" "$tmp/torch.jsonl" "$THREADS" <<'PY'
import json, sys
# UseRealTime() names a row "<name>/real_time"; times are in ms (Unit(kMillisecond)).
tiny = {b["run_name"].replace("/real_time", ""): b["real_time"] for b in json.load(open(sys.argv[1]))["benchmarks"]
        if b.get("aggregate_name") == "median"}
rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
print("conv2d on this CPU, float32, %s threads, median ms per call (tiny: im2col + OpenBLAS; PyTorch %s: oneDNN)\n"
      % (sys.argv[3], rows[0]["torch"] if rows else "?"))
print("| case | tiny ms | PyTorch ms | tiny / PyTorch |")
print("|---|---:|---:|---:|")
for r in rows:
    t = tiny.get(r["name"])
    print("| %s | %s | %.3f | %s |" % (r["name"], "%.3f" % t if t else "-", r["ms"], "%.2f" % (t / r["ms"]) if t else "-"))
PY
