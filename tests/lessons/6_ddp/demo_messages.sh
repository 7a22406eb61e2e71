#!/usr/bin/env bash
# Lesson 6's demo, as a newcomer runs it: --nproc 4 on the 2 emulated GPUs of
# the default must name TINY_EMULATED_GPUS and the fix; --nproc 1 says
# "1 rank", not "1 ranks".
#
#   demo_messages.sh DEMO
set -uo pipefail
demo=$1
failed=0
fail() { echo "FAILED: $*" >&2; failed=1; }

out=$(env -u TINY_EMULATED_GPUS TINY_FORCE_EMULATED_GPU=1 "$demo" --nproc 4 --speed-only 2>&1)
status=$?
[[ $status -eq 2 ]] || fail "--nproc 4 on 2 emulated GPUs exited with $status, not 2 (a usage error)"
grep -qF 'there are 2 emulated GPUs (TINY_EMULATED_GPUS=2, the default)' <<<"$out" ||
  fail "--nproc 4 on 2 emulated GPUs does not say how many there are and why"
grep -qF 'TINY_EMULATED_GPUS=4 ./workbook run 6 --nproc 4' <<<"$out" || fail "--nproc 4 does not give the fix"
[[ $failed -eq 0 ]] || echo "$out" >&2

out=$(TINY_EMULATED_GPUS=1 TINY_FORCE_EMULATED_GPU=1 "$demo" --nproc 1 --speed-only 2>&1)
status=$?
[[ $status -eq 0 ]] || fail "--nproc 1 exited with $status"
grep -qF 'starting 1 rank:' <<<"$out" || fail "--nproc 1 does not say 'starting 1 rank:'"
grep -qF 'DDP, 1 rank (default buckets)' <<<"$out" || fail "--nproc 1's table does not say 'DDP, 1 rank'"
if grep -qE '\b1 (ranks|GPUs)\b' <<<"$out"; then fail "--nproc 1 prints a plural: $(grep -E '\b1 (ranks|GPUs)\b' <<<"$out")"; fi
[[ $failed -eq 0 ]] || { echo "$out" >&2; exit 1; }
echo "lesson 6's demo names TINY_EMULATED_GPUS for --nproc 4 and says '1 rank' for --nproc 1"
