#!/usr/bin/env bash
# Lesson 2's README shows numbers that must not go stale, each between
# <!-- figures:NAME --> and <!-- /figures:NAME --> in the README:
#   measured   the H100 table, made here from the committed measurements (JSON)
#   h100       the demo's table: its GPU columns must be what the demo prints
#              today on the modelled H100 (the CPU column and the speedups are
#              one machine's and are not compared)
#   t4         the demo's GPU columns on the modelled T4, whole
#   model_error  the demo on the modelled H200 against the same demo run on a real H200
#   calibration  the summary line of PerfModel.Calibration, as docs/performance_model.md has it
# (a region inside a "> " quote box is compared without the "> ").
#
#   lesson2_readme_figures.sh DEMO README MEASUREMENTS MODEL_PAGE           (check; exit 1 names what differs)
#   lesson2_readme_figures.sh DEMO README MEASUREMENTS MODEL_PAGE --write   (rewrite all but h100 in place)
# The h100 table has a CPU column, so --write cannot make it: paste a run of
# `./workbook run 2` there (any machine's CPU), and this check keeps its GPU columns honest.
set -euo pipefail
demo=$1 readme=$2 measurements=$3 model_page=$4 write=${5:-}

# The median (us) of a row of the measurements, by its key.
median() {
  awk -v key="\"$1\": {" 'index($0, key) {found = 1; next}
                         found && /"median"/ {gsub(/[",]/, "", $2); print $2; exit}' "$measurements"
}

measured_table() {
  local rows=(
    "tiny, float32 (cuBLAS, no TF32)|tiny/MatmulSync/float32|tiny/Gemm/float32"
    "PyTorch, float32 (its default: TF32 off)|torch/MatmulSync/float32|torch/Gemm/float32"
    "PyTorch, TF32 tensor cores (\`allow_tf32 = True\`)|torch/MatmulSync/tf32|torch/Gemm/tf32"
    "tiny, float16 tensor cores|tiny/MatmulSync/float16|tiny/Gemm/float16"
    "tiny, bfloat16 tensor cores|tiny/MatmulSync/bfloat16|tiny/Gemm/bfloat16"
  )
  echo "| ms per product | n = 1024, then sync | n = 4096, then sync | n = 1024, GPU time | n = 4096, GPU time | TFLOP/s at 4096 (GPU time) | n = 1024's share of the n = 4096 rate (then sync; GPU time) |"
  echo "|---|---|---|---|---|---|---|"
  local row name sync queued
  for row in "${rows[@]}"; do
    IFS='|' read -r name sync queued <<<"$row"
    awk -v name="$name" -v s1="$(median "$sync/1024")" -v s4="$(median "$sync/4096")" \
        -v q1="$(median "$queued/1024/1024/1024")" -v q4="$(median "$queued/4096/4096/4096")" 'BEGIN {
      if (s1 == "" || s4 == "" || q1 == "" || q4 == "") { print "a row of " name " is missing" > "/dev/stderr"; exit 1 }
      printf "| %s | %.3f | %.2f | %.3f | %.2f | %.0f | %.0f%%; %.0f%% |\n", name, s1 / 1e3, s4 / 1e3, q1 / 1e3, q4 / 1e3,
             2 * 4096 ^ 3 / (q4 * 1e-6) / 1e12, 100 * s4 / (64 * s1), 100 * q4 / (64 * q1)
    }'
  done
}

# The demo's table rows (n first), run with the GPU model $1 and no CPU column.
demo_rows() {
  TINY_EMULATED_GPU_MODEL=$1 TINY_EMULATED_GPUS=1 TINY_EMULATED_GPU_CLOCK=modelled TINY_FORCE_EMULATED_GPU=1 \
    "$demo" --gpu-only | awk '/^ +n +cpu ms/ {print; table = 1; next} table && NF == 0 {exit} table {print}'
}

# The lines between the markers of region $1 in the README, fences and a quote's "> " dropped.
region() {
  awk -v open="<!-- figures:$1 -->" -v closing="<!-- /figures:$1 -->" '
    {line = $0; sub(/^> ?/, "", line)}
    line == closing {inside = 0}
    inside && line !~ /^```/ {print line}
    line == open {inside = 1}' "$readme"
}

# The GPU columns of a table: n, GPU ms, TFLOP/s, +copies ms, NO sync.
gpu_columns() { awk '{print $1, $3, $4, $6, $8}'; }

replace_region() {  # name, new content (file); inside a quote box, each line gets its "> "
  awk -v open="<!-- figures:$1 -->" -v closing="<!-- /figures:$1 -->" -v file="$2" '
    {line = $0; quote = sub(/^> ?/, "", line) ? "> " : ""}
    line == open {print; while ((getline text < file) > 0) print quote text; skip = 1; next}
    line == closing {skip = 0}
    !skip {print}' "$readme" >"$readme.new"
  mv "$readme.new" "$readme"
}

# The demo's own table as a real H200 printed it (two machines, committed beside
# the measurements) against the same demo on the modelled H200 (file $1): the
# GPU column and the NO sync column, like for like, host costs included.
measured_demo_rows() {  # the first table of the demo's output file $1
  awk '/^ +n +cpu ms/ {table = 1; next} table && NF == 0 {exit} table {print}' "$1"
}
model_error_table() {
  local dir first second
  dir=$(dirname "$measurements")
  first=$dir/h200-2026-11-26-demos.txt second=$dir/h200-2026-11-26-demo2-second-machine.txt
  echo "| n | measured on an H200 (two machines), ms | modelled H200, ms | error | NO sync: measured, modelled, ms |"
  echo "|---|---|---|---|---|"
  awk 'FILENAME == ARGV[1] {a[$1] = $3; an[$1] = $8; next}
       FILENAME == ARGV[2] {b[$1] = $3; bn[$1] = $8; next}
       ($1 in a) && ($1 in b) {
         mean = (a[$1] + b[$1]) / 2
         printf "| %d | %.4f, %.4f | %.4f | %+.0f%% | %.4f, %.4f; %.4f |\n", $1, a[$1], b[$1], $3, 100 * ($3 - mean) / mean,
                an[$1], bn[$1], $8
       }' <(measured_demo_rows "$first") <(measured_demo_rows "$second") "$1"
}

failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measured_table >"$tmp/measured"
demo_rows h100-sxm >"$tmp/h100"
demo_rows t4 >"$tmp/t4"
demo_rows h200 >"$tmp/h200"
{ echo '```'; cat "$tmp/t4"; echo '```'; } >"$tmp/t4.block"
model_error_table "$tmp/h200" >"$tmp/model_error"
grep -m1 'predicted rows:' "$model_page" | sed 's/^ *//' >"$tmp/calibration"
[[ -s "$tmp/calibration" ]] || { echo "FAILED: no 'predicted rows:' line in $model_page" >&2; exit 1; }
sed 's/^/    /' "$tmp/calibration" >"$tmp/calibration.block"

if [[ "$write" == "--write" ]]; then
  replace_region measured "$tmp/measured"
  replace_region t4 "$tmp/t4.block"
  replace_region model_error "$tmp/model_error"
  replace_region calibration "$tmp/calibration.block"
  echo "wrote the figures of $readme but h100: paste a fresh ./workbook run 2 into its h100 block"
fi

compare() {  # name, expected file, found file, what
  if ! diff -q "$2" "$3" >/dev/null; then
    echo "FAILED: $readme's $1 figures differ from $4 (< expected, > README):" >&2
    diff "$2" "$3" | sed 's/^/    /' >&2 || true
    failed=1
  else
    echo "$1: $(wc -l <"$2") lines match $4"
  fi
}
region measured >"$tmp/readme_measured"
compare measured "$tmp/measured" "$tmp/readme_measured" "$measurements"
gpu_columns <"$tmp/h100" >"$tmp/h100.gpu"
region h100 | awk '/^ +n +cpu ms/ {table = 1} table && NF > 0' | gpu_columns >"$tmp/readme_h100.gpu"
compare h100 "$tmp/h100.gpu" "$tmp/readme_h100.gpu" "the demo's GPU columns on the modelled H100 (n, ms, TFLOP/s, +copies ms, NO sync)"
region t4 >"$tmp/readme_t4"
compare t4 "$tmp/t4" "$tmp/readme_t4" "the demo's table on the modelled T4"
region model_error >"$tmp/readme_model_error"
compare model_error "$tmp/model_error" "$tmp/readme_model_error" "the demo on the modelled H200 against its runs on a real one"
region calibration | sed 's/^ *//' >"$tmp/readme_calibration"
compare calibration "$tmp/calibration" "$tmp/readme_calibration" "$model_page's calibration summary"
if [[ $failed -ne 0 ]]; then
  echo "(regenerate: bash $0 DEMO README MEASUREMENTS MODEL_PAGE --write, and paste a fresh run into the h100 block)" >&2
  exit 1
fi
