# Sourced by report_timelines.sh and report_loss_curves.sh (not run alone): what
# both do with the HTML report of a graded submission, after `report=$1`.
#
#   require_report       exits 1, saying so, when $report is missing or empty
#   lesson_section N     prints lesson N's <section> of $report, line by line
#                        (nothing when the report has no lesson N)
#   fail MESSAGE...      prints FAILED: MESSAGE on stderr; the script then exits 1 ($failed)

failed=0

require_report() {
  [[ -s "$report" ]] || { echo "FAILED: no report at $report (did dev.solutions_get_full_marks run?)" >&2; exit 1; }
}

lesson_section() {
  awk -v open="<section id=\"lesson-$1\">" 'index($0, open) == 1 {inside = 1} inside {print} inside && /<\/section>/ {exit}' "$report"
}

fail() {
  echo "FAILED: $*" >&2
  failed=1
}
