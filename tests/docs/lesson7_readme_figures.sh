#!/usr/bin/env bash
# Lesson 7's README shows the demo's step-time tables, modelled on the H100 and
# on the T4, each between <!-- figures:NAME --> and <!-- /figures:NAME -->
# (names lesson7_h100 and lesson7_t4). They must be what the demo prints today:
# the modelled clock is deterministic, so any difference is a change of the
# model or of the lesson, and the README must follow it.
#
#   lesson7_readme_figures.sh DEMO README           (check; exit 1 shows what differs)
#   lesson7_readme_figures.sh DEMO README --write   (rewrite both tables in place)
set -euo pipefail
demo=$1 readme=$2 write=${3:-}

# The demo's step-time table, run with the GPU model $1, in a code block.
demo_table() {
  echo '```'
  TINY_EMULATED_GPU_MODEL=$1 TINY_EMULATED_GPUS=1 TINY_EMULATED_GPU_CLOCK=modelled TINY_FORCE_EMULATED_GPU=1 \
    "$demo" --speed-only | awk '/^one training step/ {table = 1} table {print}'
  echo '```'
}

# region and replace_region: the README's figures between their markers.
fence=no
source "$(dirname "${BASH_SOURCE[0]}")/readme_regions.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for model in h100 t4; do
  demo_table "$([[ $model == h100 ]] && echo h100-sxm || echo t4)" >"$tmp/$model"
  if [[ $(wc -l <"$tmp/$model") -lt 10 ]]; then
    echo "FAILED: the demo printed no step-time table on $model:" >&2
    cat "$tmp/$model" >&2
    exit 1
  fi
  check_region "lesson7_$model" "$tmp/$model" "the demo's"
done
regions_done "bash $0 DEMO README --write"
