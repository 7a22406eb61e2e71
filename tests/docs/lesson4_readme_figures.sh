#!/usr/bin/env bash
# Lesson 4's README shows the demo's output on the modelled GPUs, between
# <!-- figures:NAME --> and <!-- /figures:NAME -->:
#   h100  ./workbook run 4 (3 epochs of Fashion-MNIST, then the table of habits) on the modelled H100
#   t4    the same with --epochs 1 on the modelled T4
# Every line must be what the demo prints today, except the CPU's own time
# ("this CPU: 12.3 s"), which is one machine's and is not compared.
#
#   lesson4_readme_figures.sh DEMO README            (check; exit 1 names what differs; 77 without Fashion-MNIST)
#   lesson4_readme_figures.sh DEMO README --write    (rewrite both regions in place)
set -euo pipefail
demo=$1 readme=$2 write=${3:-}

if [[ ! -d /usr/share/datasets/fashion-mnist ]]; then
  echo "SKIPPED: the README's figures are Fashion-MNIST's (Debian's dataset-fashion-mnist is not installed)"
  exit 77
fi

# The demo's output on model $1 (more arguments go to the demo), the CPU's time blanked.
demo_output() {
  local model=$1
  shift
  TINY_EMULATED_GPU_MODEL=$model TINY_EMULATED_GPUS=1 TINY_EMULATED_GPU_MEMORY=4GiB TINY_EMULATED_GPU_CLOCK=modelled TINY_FORCE_EMULATED_GPU=1 \
    "$demo" "$@" | sed -E 's/\(this CPU: [0-9.]+ s\)/(this CPU: ... s)/'
}

# region and replace_region: the README's figures between their markers.
source "$(dirname "${BASH_SOURCE[0]}")/readme_regions.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
demo_output h100-sxm >"$tmp/h100"
demo_output t4 --epochs 1 >"$tmp/t4"
failed=0
for name in h100 t4; do check_region "$name" "$tmp/$name" "what the demo prints today"; done
regions_done "bash $0 DEMO README --write"
