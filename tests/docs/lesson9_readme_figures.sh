#!/usr/bin/env bash
# Lesson 9's README shows the demo's tables on three modelled GPUs, each
# between <!-- figures:NAME --> and <!-- /figures:NAME --> (NAME: l4, h100,
# t4). Every figure in them is modelled time, the same on every machine, so
# each table must be what the demo prints today, whole.
#
#   lesson9_readme_figures.sh DEMO README            (check; exit 1 shows what differs)
#   lesson9_readme_figures.sh DEMO README --write    (rewrite the three tables in place)
set -euo pipefail
demo=$1 readme=$2 write=${3:-}

# The demo's table (its header and rows) on GPU model $1.
demo_table() {
  TINY_EMULATED_GPU_MODEL=$1 TINY_EMULATED_GPUS=1 TINY_EMULATED_GPU_CLOCK=modelled TINY_FORCE_EMULATED_GPU=1 \
    "$demo" | awk '/^program +step ms/ {table = 1} table && NF == 0 {exit} table {print}'
}

# region and replace_region: the README's figures between their markers.
source "$(dirname "${BASH_SOURCE[0]}")/readme_regions.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for pair in l4:l4 h100:h100-sxm t4:t4; do
  name=${pair%%:*} model=${pair#*:}
  demo_table "$model" >"$tmp/$name"
  check_region "$name" "$tmp/$name" "the demo's on $model"
done
regions_done "bash $0 DEMO README --write, then reread the text around the tables"
