#!/usr/bin/env bash
# Lesson 5's README shows the demo's output on the modelled GPUs, between
# <!-- figures:NAME --> and <!-- /figures:NAME -->:
#   h100  ./workbook run 5 (the losses, the bytes, the speed table) on two modelled H100s
#   t4    the speed table of ./workbook run 5 --epochs 1 on two modelled T4s
# Every line must be what the demo prints today: on the modelled clock all of it is
# the same on every machine.
#
#   lesson5_readme_figures.sh DEMO README            (check; exit 1 names what differs)
#   lesson5_readme_figures.sh DEMO README --write    (rewrite both regions in place)
set -euo pipefail
demo=$1 readme=$2 write=${3:-}

# The demo's output on two GPUs of model $1 (more arguments go to the demo).
demo_output() {
  local model=$1
  shift
  TINY_EMULATED_GPU_MODEL=$model TINY_EMULATED_GPUS=2 TINY_EMULATED_GPU_MEMORY=4GiB TINY_EMULATED_GPU_CLOCK=modelled \
    TINY_FORCE_EMULATED_GPU=1 "$demo" "$@"
}

# region and replace_region: the README's figures between their markers.
source "$(dirname "${BASH_SOURCE[0]}")/readme_regions.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
demo_output h100-sxm >"$tmp/h100"
demo_output t4 --epochs 1 | sed -n '/^one training step/,$p' >"$tmp/t4"
failed=0
for name in h100 t4; do check_region "$name" "$tmp/$name" "what the demo prints today"; done
regions_done "bash $0 DEMO README --write"
