#!/usr/bin/env bash
# Lesson 3's README shows the demo's "what moving costs" table, between
# <!-- figures:NAME --> and <!-- /figures:NAME -->:
#   h100  ./workbook run 3's table on the modelled H100: its GPU columns must be
#         what the demo prints today (the cpu column is one machine's clock and
#         is not compared; --write fills it from this machine's run)
#   t4    the table of ./workbook run 3 --gpu-only on the modelled T4, whole
#
#   lesson3_readme_figures.sh DEMO README            (check; exit 1 names what differs)
#   lesson3_readme_figures.sh DEMO README --write    (rewrite both regions in place)
set -euo pipefail
demo=$1 readme=$2 write=${3:-}

# The demo's table on one GPU of model $1 (more arguments go to the demo).
demo_table() {
  local model=$1
  shift
  TINY_EMULATED_GPU_MODEL=$model TINY_EMULATED_GPUS=2 TINY_EMULATED_GPU_MEMORY=4GiB TINY_EMULATED_GPU_CLOCK=modelled \
    TINY_FORCE_EMULATED_GPU=1 "$demo" "$@" | sed -n '/^what moving costs/,$p'
}

# A table's rows with the cpu column (the last) dropped: the model's rows start with its widths.
gpu_columns() { awk '$1 ~ /^[0-9]+-/ {NF--} {print}'; }

# region, replace_region, check_region and regions_done: the README's figures between their markers.
source "$(dirname "${BASH_SOURCE[0]}")/readme_regions.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
demo_table t4 --gpu-only >"$tmp/t4"
check_region t4 "$tmp/t4" "what the demo prints today"

if [[ "$write" == "--write" ]]; then
  demo_table h100-sxm >"$tmp/h100.full"
  [[ -s "$tmp/h100.full" ]] && replace_region h100 "$tmp/h100.full"
fi
demo_table h100-sxm --gpu-only | gpu_columns >"$tmp/h100"
if [[ ! -s "$tmp/h100" ]]; then
  echo "FAILED: nothing was made for the h100 figures (the demo printed no table)" >&2
  failed=1
elif ! diff -q "$tmp/h100" <(region h100 | gpu_columns) >/dev/null; then
  echo "FAILED: $readme's h100 figures differ from what the demo prints today, the cpu column left out (< expected, > README):" >&2
  diff "$tmp/h100" <(region h100 | gpu_columns) | sed 's/^/    /' >&2 || true
  failed=1
else
  echo "h100: $(wc -l <"$tmp/h100") lines match what the demo prints today (but the cpu column)"
fi
regions_done "bash $0 DEMO README --write"
