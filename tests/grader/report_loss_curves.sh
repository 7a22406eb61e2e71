#!/usr/bin/env bash
# The HTML report draws a loss curve for every training check (issue 20 item 7):
# in each named check's block, a figure whose caption says "loss per" holds an
# SVG with two lines, the student's losses and the reference's.
#
#   report_loss_curves.sh REPORT.html LESSON:CHECK...   (exit 1 names each check without its curve)
set -euo pipefail
report=$1
shift
source "$(dirname "${BASH_SOURCE[0]}")/report_sections.sh"
require_report
for wanted in "$@"; do
  lesson=${wanted%%:*} check=${wanted#*:}
  section=$(lesson_section "$lesson")
  # The check's block: from its name's line to the next check (or the section's end).
  block=$(awk -v name="<b>$check</b>:" 'index($0, name) {inside = 1} inside && /^<div class="check">$/ {exit} inside {print}' <<<"$section" | tr -d '\n')
  if [[ -z "$block" ]]; then
    fail "lesson $lesson has no check $check in $report"
    continue
  fi
  curve=$(grep -oE '<figure><figcaption>[^<]*loss per [^<]*</figcaption><svg.*' <<<"$block" | sed 's|</figure>.*||' || true)
  lines=$(grep -o '<polyline' <<<"$curve" | wc -l || true)
  if [[ -z "$curve" || $lines -lt 2 ]]; then
    fail "lesson $lesson's $check draws no loss curve with your losses beside the reference's" \
         "(found $lines line(s); the check must record ctx.details[\"curves\"] as soon as both runs are in)"
  else
    echo "lesson $lesson $check: a loss curve of $lines lines"
  fi
done
exit $failed
