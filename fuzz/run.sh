#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer, ASan + UBSan) and runs every fuzz target for a bounded
# time over a copy of its committed corpus (fuzz/corpus/<target>/), so that nothing is written into
# the repository. Prints each target's executions; fails if any target found a crash, a sanitizer
# report, a leak, a hang (-timeout) or an allocation over the limits.
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#
# Environment: FUZZ_BUILD_DIR (default build/fuzz), FUZZ_JOBS (targets run at once; default 1),
# FUZZ_KEEP=1 keeps the work folder (its new inputs and crash files) and prints where it is.
# A crash leaves crash-<sha1> in the work folder: reproduce it with build/fuzz/fuzz/fuzz_<target> FILE,
# fix the reader, and commit the file into fuzz/corpus/<target>/ as a regression.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
cd "$ROOT"
seconds=${1:-60}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz/run.sh: seconds per target must be a positive number, got '$seconds'" >&2; exit 2; }
shift || true
ALL_TARGETS=(npy safetensors idx digits_csv bundle recipe submission archive)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL_TARGETS[@]}")
build_dir=${FUZZ_BUILD_DIR:-build/fuzz}

command -v clang++ >/dev/null || { echo "fuzz/run.sh: clang++ is missing: sudo apt-get install clang" >&2; exit 1; }
if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake --preset fuzz -B "$build_dir" >/dev/null
fi
cmake --build "$build_dir" --target $(printf 'fuzz_%s ' "${targets[@]}")

work=$(mktemp -d "${TMPDIR:-/tmp}/tiny-fuzz-run-XXXXXX")
if [[ "${FUZZ_KEEP:-0}" != 1 ]]; then trap 'rm -rf "$work"' EXIT; fi

run_one() {  # run_one TARGET: prints one summary line, returns libFuzzer's status
  local t=$1 dir="$work/$t"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -r "fuzz/corpus/$t/." "$dir/corpus/"
  local status=0
  # -rss_limit_mb / -malloc_limit_mb: a size claimed by a header must never become an allocation.
  # -timeout: one input taking longer is a hang. ASan's leak check stays on.
  "$build_dir/fuzz/fuzz_$t" "$dir/corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -timeout=10 -max_len=65536 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
      </dev/null >"$dir/log" 2>&1 || status=$?
  local execs cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  cov=$(grep -Eo 'cov: [0-9]+' "$dir/log" | tail -1 | cut -d' ' -f2)
  printf '%-12s %s: %10s executions in %ss, coverage %s edges, corpus %s -> %s files\n' "$t" \
    "$([[ $status -eq 0 ]] && echo ok || echo FAILED)" "${execs:-?}" "$seconds" "${cov:-?}" \
    "$(ls "fuzz/corpus/$t" | wc -l)" "$(ls "$dir/corpus" | wc -l)"
  if [[ $status -ne 0 ]]; then
    grep -E 'ERROR|SUMMARY|==[0-9]+==|runtime error|Test unit written|terminate' "$dir/log" | head -20 | sed 's/^/    /'
    echo "    full log: $dir/log (FUZZ_KEEP=1 keeps it)"
  fi
  return $status
}

failed=()
jobs=${FUZZ_JOBS:-1}
if [[ "$jobs" -le 1 ]]; then
  for t in "${targets[@]}"; do run_one "$t" || failed+=("$t"); done
else
  for t in "${targets[@]}"; do
    while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do sleep 1; done
    ( rc=0; run_one "$t" >"$work/$t.summary" || rc=$?; echo $rc >"$work/$t.rc" ) &
  done
  wait
  for t in "${targets[@]}"; do
    cat "$work/$t.summary"
    [[ "$(cat "$work/$t.rc" 2>/dev/null)" == 0 ]] || failed+=("$t")
  done
fi
if [[ "${FUZZ_KEEP:-0}" == 1 ]]; then echo "work folder kept: $work"; fi
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz/run.sh: targets that failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz/run.sh: ${#targets[@]} targets ran ${seconds}s each without a failure"
