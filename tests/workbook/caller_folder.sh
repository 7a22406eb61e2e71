#!/usr/bin/env bash
# A relative path typed to ./workbook means a path in the folder it was typed
# in, though the script runs the grader from the repository's root (issue 20,
# found in the instructor trial: "--batch batch is not a folder" from the
# class's folder). The real script runs from a copy of the root whose grader
# is the real one, through a stand-in that passes everything on; the commands
# typed in another folder ($here) write and read there, never in the root.
# Usage: caller_folder.sh WORKBOOK GRADER
set -uo pipefail
workbook=$1 grader=$(readlink -f "$2")
root=$(mktemp -d) here=$(mktemp -d)
trap 'rm -rf "$root" "$here"' EXIT
cp "$workbook" "$root/workbook"
mkdir -p "$root/build/default/grader" "$root/bin"
touch "$root/CMakeLists.txt" "$root/build/default/CMakeCache.txt" "$root/build/default/build.ninja"
printf '#!/usr/bin/env bash\nexec %q "$@"\n' "$grader" >"$root/build/default/grader/workbook-grader"
# cmake must not be needed: the stand-in build folder is configured, and its empty build.ninja has no grader to build.
printf '#!/usr/bin/env bash\necho "cmake was called: $*" >&2; exit 3\n' >"$root/bin/cmake"
chmod +x "$root/build/default/grader/workbook-grader" "$root/bin/cmake"
status=0
fail() { echo "FAIL: $*"; status=1; }
in_here() { (cd "$here" && NO_COLOR=1 PATH="$root/bin:$PATH" "$root/workbook" "$@" 2>&1 </dev/null); }

# A folder typed relative is read where it was typed: there is no batch/ in the root, and an empty one here.
mkdir "$here/batch"
out=$(in_here grade --batch batch --out grades)
[[ "$out" != *"--batch batch is not a folder"* ]] || fail "grade --batch batch looked for batch/ in the root: $out"
[[ "$out" == *"$here/batch"* ]] || fail "grade --batch batch typed in $here did not read $here/batch: $out"
[[ ! -e "$root/grades" ]] || fail "grade --out grades typed in $here wrote into the repository's root"

# So is a submission's archive, and results.json is written there.
printf 'not an archive' >"$here/ada.tar.gz"
out=$(in_here grade --submission ada.tar.gz --json results.json)
[[ "$out" != *"--submission ada.tar.gz does not exist"* ]] ||
  fail "grade --submission ada.tar.gz looked for ada.tar.gz in the root: $out"
[[ -f "$here/results.json" ]] || fail "grade --json results.json typed in $here wrote no $here/results.json: $out"
[[ ! -e "$root/results.json" ]] || fail "grade --json results.json typed in $here wrote into the repository's root"

[[ $status -eq 0 ]] && echo "ok: relative paths typed to ./workbook are read and written in the folder they were typed in"
exit $status
