#!/usr/bin/env bash
# The lesson commands (check, run, hint, reset, solution) reach the grader as
# typed (issue 22 item 5: one owner per fact): the script checks no lesson
# number and builds or runs no demo of its own; the grader does both, from the
# recipe CMake wrote. The real script runs from a copy of the repository's root
# whose "grader" is a stand-in that prints what it was given; lessons/ holds
# only lesson 1, so a script that checked numbers again would refuse 99 itself.
# Usage: lesson_commands.sh WORKBOOK
set -uo pipefail
workbook=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
cp "$workbook" "$root/workbook"
mkdir -p "$root/lessons/1_device_check" "$root/build/default/grader" "$root/bin"
touch "$root/CMakeLists.txt" "$root/build/default/CMakeCache.txt" "$root/build/default/build.ninja"
cat >"$root/build/default/grader/workbook-grader" <<'FAKE'
#!/usr/bin/env bash
echo "grader got: $*"
FAKE
# cmake must not be needed: the stand-in build folder is configured, and its empty build.ninja has no grader to build.
cat >"$root/bin/cmake" <<'FAKE'
#!/usr/bin/env bash
echo "cmake was called: $*" >&2; exit 3
FAKE
chmod +x "$root/build/default/grader/workbook-grader" "$root/bin/cmake"
status=0
expect() {  # expect "ARGS..." "WHAT THE GRADER MUST GET"
  local out rc
  # shellcheck disable=SC2086
  out=$(NO_COLOR=1 PATH="$root/bin:$PATH" "$root/workbook" $1 2>&1 </dev/null)
  rc=$?
  if [[ $rc -ne 0 || "$out" != *"grader got: $2"* ]]; then
    echo "FAIL: ./workbook $1 exited $rc and printed (the grader should have got '$2'):"
    printf '%s\n' "$out" | head -5
    status=1
  fi
}
expect "hint 99" "hint 99"
expect "check abc" "check abc"
expect "reset" "reset"
expect "solution 99" "solution 99"
expect "run 99 --epochs 2" "run 99 --epochs 2"
expect "run 1 --help" "run 1 --help"
expect "run --help" "run --help"
expect "check --help" "check --help"
[[ $status -eq 0 ]] && echo "ok: every lesson command reached the grader as typed"
exit $status
