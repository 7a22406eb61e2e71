#!/usr/bin/env bash
# Gradescope's setup.sh: runs once when the autograder image is built.
# Upload a zip of the whole workbook repository (with this file at
# grader/gradescope/setup.sh) as the autograder source, and copy this file and
# run_autograder to the top of the zip, as Gradescope expects them there.
set -euo pipefail
cd /autograder/source
# Installs the Debian/Ubuntu packages the build needs, builds tiny, the grader
# and every lesson's checker, and lists the lessons as a smoke test.
./workbook list
