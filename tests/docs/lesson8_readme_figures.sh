#!/usr/bin/env bash
# Lesson 8's README shows the demo's speed story (its sections 6 and 7:
# throughput and peak memory against the batch size, and gradient
# accumulation against one batch) on the modelled H100 and T4, between
# <!-- figures:NAME --> and <!-- /figures:NAME --> (NAME: h100, t4). Step
# times are modelled and memory figures exact (the demo runs its ops one at a
# time), the same on every machine, so each region must be what the demo prints today.
#
#   lesson8_readme_figures.sh DEMO README            (check; exit 1 shows what differs)
#   lesson8_readme_figures.sh DEMO README --write    (rewrite both regions in place)
set -euo pipefail
demo=$1 readme=$2 write=${3:-}

# The demo's sections 6 and 7 on GPU model $1, with the demo's own 64 MiB capacity.
demo_story() {
  env -u TINY_EMULATED_GPU_MEMORY TINY_EMULATED_GPU_MODEL=$1 TINY_EMULATED_GPUS=1 TINY_EMULATED_GPU_CLOCK=modelled \
    TINY_FORCE_EMULATED_GPU=1 "$demo" | awk '/^6\. / {story = 1} story {print}'
}

# region and replace_region: the README's figures between their markers.
source "$(dirname "${BASH_SOURCE[0]}")/readme_regions.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for pair in h100:h100-sxm t4:t4; do
  name=${pair%%:*} model=${pair#*:}
  demo_story "$model" >"$tmp/$name"
  check_region "$name" "$tmp/$name" "the demo's on $model"
done
regions_done "bash $0 DEMO README --write, then reread the text around the figures"
