#!/usr/bin/env bash
# ./workbook shows how far a long build is, off a terminal and under NO_COLOR too
# (issue 17: the first `./workbook grade` was silent for ten minutes).
# A stand-in `cmake` first on PATH prints 200 ninja steps; the real workbook
# script must turn them into progress lines on stderr, then run the command.
# Usage: build_progress.sh WORKBOOK
set -euo pipefail
workbook=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/cmake" <<'FAKE'
#!/usr/bin/env bash
# Only `cmake --build ...` is expected here (the build is configured already).
[[ "$1" == --build ]] || { echo "fake cmake: unexpected call: $*" >&2; exit 3; }
echo "[0/2] Re-checking globbed directories..."
for i in $(seq 1 200); do echo "[$i/200 0.1s] Building CXX object framework/CMakeFiles/tiny.dir/src/f$i.cpp.o"; done
FAKE
chmod +x "$work/cmake"
out=$(NO_COLOR=1 PATH="$work:$PATH" "$workbook" list 2>&1 </dev/null | cat)
printf '%s\n' "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q 'building tiny, the grader.*(200 steps' <<<"$out" || fail "no line saying what is built and how many steps"
lines=$(grep -c '^workbook: building \[[0-9]*/200\] [0-9]*%' <<<"$out" || true)
[[ $lines -ge 10 && $lines -le 30 ]] || fail "expected a progress line at every tenth of the build (10 to 30 lines), got $lines"
grep -q '^workbook: building \[200/200\] 100%' <<<"$out" || fail "no line for the finished build"
grep -q $'\e' <<<"$out" && fail "escape sequences under NO_COLOR off a terminal"
grep -q 'Device check' <<<"$out" || fail "the command did not run after the build"
echo "ok: $lines progress lines"
