#!/usr/bin/env bash
# Lesson 5's step_speed check and the demo's speed table time the large
# model's step the same way (one warm-up step, then the mean of 2), so a
# student reads the same figures in both: the check's note must show the
# demo's one-GPU and DataParallel times of the 1024-1024-1024-10 MLP.
#
#   step_speed_matches_demo.sh CHECKS REFERENCE DEMO
set -euo pipefail
checks=$1 reference=$2 demo=$3
export TINY_EMULATED_GPU_MODEL=h100-sxm TINY_EMULATED_GPUS=2 TINY_EMULATED_GPU_CLOCK=modelled TINY_FORCE_EMULATED_GPU=1

row=$("$demo" --epochs 1 | grep -E '^1024-1024-1024-10 ')
read -r _ _ one_gpu parallel _ <<<"$row"
note=$("$checks" --student "$reference" --reference "$reference" --check step_speed 2>&1) || {
  echo "FAILED: the step_speed check did not pass the reference:" >&2
  echo "$note" >&2
  exit 1
}
# Two processes whose modelled clocks ran different work before these steps
# (the demo times a small model first): the same figure may round to the next
# microsecond, never more.
failed=0
for pair in "your DataParallel step took:$parallel" "one GPU alone:$one_gpu"; do
  words=${pair%%:*} want=${pair##*:}
  got=$(grep -oE "$words [0-9]+\.[0-9]+ ms" <<<"$note" | grep -oE '[0-9]+\.[0-9]+' || true)
  if [[ -z "$got" ]] || ! awk -v a="$got" -v b="$want" 'BEGIN {d = a - b; exit !(d <= 0.0011 && d >= -0.0011)}'; then
    echo "FAILED: the check's note does not say '$words $want ms' (within 0.001; it says '${got:-nothing}'; the demo's row: $row)" >&2
    failed=1
  fi
done
[[ $failed -eq 0 ]] || { echo "$note" >&2; exit 1; }
echo "step_speed shows the demo's figures: one GPU $one_gpu ms, DataParallel $parallel ms"
