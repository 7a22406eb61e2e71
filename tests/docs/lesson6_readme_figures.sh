#!/usr/bin/env bash
# Lesson 6's README shows the demo's step-time tables (1 GPU, DataParallel,
# DDP, and DDP's bucket sizes), modelled on the H100 and on the T4, each between
# <!-- figures:NAME --> and <!-- /figures:NAME --> (lesson6_h100, lesson6_t4).
# And the training run's own lines (lesson6_train: the losses, the modelled
# time of the whole run, the test accuracy), from ./workbook run 6 on the H100.
# They must be what the demo prints today: the modelled clock is
# deterministic, so any difference is a change of the model or of the lesson,
# and the README must follow it.
#
#   lesson6_readme_figures.sh DEMO README           (check; exit 1 shows what differs)
#   lesson6_readme_figures.sh DEMO README --write   (rewrite both tables in place)
set -euo pipefail
demo=$1 readme=$2 write=${3:-}

# The demo's tables (rank 0 prints them; its "[rank0]: " prefix dropped), modelled on GPU $1, in a code block.
demo_tables() {
  echo '```'
  TINY_EMULATED_GPU_MODEL=$1 TINY_EMULATED_GPUS=2 TINY_EMULATED_GPU_CLOCK=modelled TINY_FORCE_EMULATED_GPU=1 \
    "$demo" --speed-only | sed -n 's/^\[rank0\]: \{0,1\}//p' | awk '/^one training step/ {table = 1} table {print}'
  echo '```'
}

# Rank 0's lines of the training run on the modelled H100 (before the step times), in a code block.
demo_training() {
  echo '```'
  TMPDIR=/tmp TINY_EMULATED_GPU_MODEL=h100-sxm TINY_EMULATED_GPUS=2 TINY_EMULATED_GPU_CLOCK=modelled \
    TINY_FORCE_EMULATED_GPU=1 "$demo" | awk '/^starting 2 ranks: .*--speed-ranks/ {exit} /^\[rank0\]:/ {print}' |
    sed -E 's/(lesson6_ddp_digits-)[0-9]+(\.safetensors)/\11000\2/'  # the checkpoint is per uid: shown as a first user's
  echo '```'
}

# region and replace_region: the README's figures between their markers.
fence=no
source "$(dirname "${BASH_SOURCE[0]}")/readme_regions.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for model in h100 t4; do
  demo_tables "$([[ $model == h100 ]] && echo h100-sxm || echo t4)" >"$tmp/$model"
  if [[ $(wc -l <"$tmp/$model") -lt 12 ]]; then
    echo "FAILED: the demo printed no step-time tables on $model:" >&2
    cat "$tmp/$model" >&2
    exit 1
  fi
  check_region "lesson6_$model" "$tmp/$model" "the demo's"
done
demo_training >"$tmp/train"
check_region lesson6_train "$tmp/train" "the demo's training run"
regions_done "bash $0 DEMO README --write"
