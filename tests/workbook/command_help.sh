#!/usr/bin/env bash
# `./workbook check --help` (and hint, reset, solution, run) prints that command's
# help and exits 0 (issue 17: it said "'check' needs a lesson number, got '--help'").
# Usage: command_help.sh WORKBOOK
set -uo pipefail
workbook=$1
status=0
for cmd in check hint reset solution run; do
  for flag in --help -h; do
    out=$("$workbook" "$cmd" "$flag" 2>&1 </dev/null)
    rc=$?
    if [[ $rc -ne 0 ]] || ! grep -qi "usage" <<<"$out" || grep -q "needs a lesson number" <<<"$out"; then
      echo "FAIL: ./workbook $cmd $flag exited $rc and printed:"
      printf '%s\n' "$out" | head -5
      status=1
    fi
  done
done
[[ $status -eq 0 ]] && echo "ok: every command's --help and -h"
exit $status
