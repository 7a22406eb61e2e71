#!/bin/sh
# Runs the hostile submissions again as a plain user (nobody), as students
# grade: run as root by CI, beside dev.grader.hostile_submissions (root's run).
# Skips (77), saying why, when not root (then that test is already a plain
# user's run) or when nobody cannot reach the build.
# Usage: as_plain_user.sh CMAKE GRADER SOURCE
cmake=$1 grader=$2 source=$3
if [ "$(id -u)" != 0 ]; then
  echo "skipped: not root, so dev.grader.hostile_submissions already runs as a plain user"; exit 77
fi
command -v setpriv >/dev/null || { echo "skipped: setpriv (util-linux) is missing"; exit 77; }
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
if ! as_nobody test -x "$grader" || ! as_nobody test -r "$source/tests/grader/hostile_test.cmake"; then
  echo "skipped: the user nobody cannot reach $grader or $source (a checkout under a private folder)"; exit 77
fi
work=$(mktemp -d /tmp/workbook-hostile-nobody.XXXXXX) || exit 1
chmod 777 "$work"
trap 'rm -rf "$work"' EXIT
as_nobody env HOME="$work" "$cmake" -DGRADER="$grader" -DSOURCE="$source" -DWORK="$work/work" \
  -P "$source/tests/grader/hostile_test.cmake"
