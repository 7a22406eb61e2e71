#!/usr/bin/env bash
# The lesson demos read their flags with CLI11 (issue 22 item 5): `--help`
# prints the demo's usage and its options and exits 0 (it ran the demo, or
# printed a bare usage line with status 2, before); a flag no demo has is
# named in the error, with status 2.
# Usage: demo_flags.sh DEMO...   (the solution_N_demo programs)
set -uo pipefail
status=0
for demo in "$@"; do
  n=$(basename "$demo" | sed -E 's/^solution_([0-9]+)_demo$/\1/')
  out=$("$demo" --help 2>&1 </dev/null); rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q "^Usage: ./workbook run $n " <<<"$out" || ! grep -q -- "-h,--help" <<<"$out"; then
    echo "FAIL: $(basename "$demo") --help exited $rc and printed:"; printf '%s\n' "$out" | head -5; status=1
  fi
  out=$("$demo" --no-such-flag 2>&1 </dev/null); rc=$?
  if [[ $rc -ne 2 ]] || ! grep -q -- "--no-such-flag" <<<"$out"; then
    echo "FAIL: $(basename "$demo") --no-such-flag exited $rc (expected 2, naming the flag) and printed:"
    printf '%s\n' "$out" | head -5; status=1
  fi
done
[[ $status -eq 0 ]] && echo "ok: $# demos: --help lists their options, an unknown flag is named with status 2"
exit $status
