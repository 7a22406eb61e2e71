#!/usr/bin/env bash
# The HTML report of a graded submission draws, for every lesson with a timed
# check, the student's and the reference's GPU timelines side by side (issue 18):
# each named lesson's section holds a <div class="timelines"> with two figures,
# "yours" and "reference", each an SVG drawn from its trace.
#
#   report_timelines.sh REPORT.html LESSON...   (exit 1 names each lesson without its two timelines)
set -euo pipefail
report=$1
shift
source "$(dirname "${BASH_SOURCE[0]}")/report_sections.sh"
require_report
for lesson in "$@"; do
  section=$(lesson_section "$lesson" | tr -d '\n')
  if [[ -z "$section" ]]; then
    fail "lesson $lesson is not in $report"
    continue
  fi
  # The figures of the timelines blocks that drew an SVG (a trace that could not be drawn says so instead).
  yours=$(grep -oE '<figure><figcaption>yours</figcaption>[[:space:]]*<svg' <<<"$section" | wc -l || true)
  reference=$(grep -oE '<figure><figcaption>reference</figcaption>[[:space:]]*<svg' <<<"$section" | wc -l || true)
  if [[ $yours -lt 1 || $reference -lt 1 ]]; then
    fail "lesson $lesson's section draws $yours timeline(s) of yours and $reference of the reference's" \
         "(expected one of each: its timed check sends no trace, or the report did not draw it)"
  else
    echo "lesson $lesson: $yours timeline(s) of yours beside $reference of the reference's"
  fi
done
exit $failed
