#!/usr/bin/env bash
# Every lesson README with modelled time (2 to 9) has its box "What the emulated
# GPU models, and what it does not" (or "GPUs model ... they do not"), and in it
# the model's measured error against the H100 rows: the summary line of
# PerfModel.Calibration between <!-- figures:calibration --> and
# <!-- /figures:calibration -->, as docs/performance_model.md has it today (a
# region inside a "> " quote box is compared without the "> ").
#
#   emulator_boxes.sh MODEL_PAGE README...            (check; exit 1 names what is missing or differs)
#   emulator_boxes.sh MODEL_PAGE README... --write    (rewrite every README's calibration region)
set -euo pipefail
model_page=$1
shift
write=""
readmes=()
for arg in "$@"; do
  if [[ "$arg" == "--write" ]]; then write=--write; else readmes+=("$arg"); fi
done

expected=$(grep -m1 'predicted rows:' "$model_page" | sed 's/^ *//')
[[ -n "$expected" ]] || { echo "FAILED: no 'predicted rows:' line in $model_page" >&2; exit 1; }

# The calibration region's lines of README $1, the quote's "> " and the indent dropped.
calibration() {
  awk '{line = $0; sub(/^> ?/, "", line)}
       line == "<!-- /figures:calibration -->" {inside = 0}
       inside && line !~ /^ *$/ {sub(/^ +/, "", line); print line}
       line == "<!-- figures:calibration -->" {inside = 1}' "$1"
}

failed=0
for readme in "${readmes[@]}"; do
  if ! grep -Eq 'What the emulated GPUs? models?, and what (it does|they do) not' "$readme"; then
    echo "FAILED: $readme has no box 'What the emulated GPU models, and what it does not'" >&2
    failed=1
    continue
  fi
  if ! grep -q '<!-- figures:calibration -->' "$readme"; then
    echo "FAILED: $readme's emulator box has no <!-- figures:calibration --> region (the model's measured error)" >&2
    failed=1
    continue
  fi
  if [[ "$write" == "--write" ]]; then
    awk -v text="$expected" '{line = $0; quote = sub(/^> ?/, "", line) ? "> " : ""}
      line == "<!-- figures:calibration -->" {print; print quote "    " text; skip = 1; next}
      line == "<!-- /figures:calibration -->" {skip = 0}
      !skip {print}' "$readme" >"$readme.new"
    mv "$readme.new" "$readme"
  fi
  found=$(calibration "$readme")
  if [[ "$found" != "$expected" ]]; then
    echo "FAILED: $readme's calibration line differs from $model_page's:" >&2
    echo "    expected: $expected" >&2
    echo "    README:   $found" >&2
    failed=1
  else
    echo "$readme: the box and its calibration line match"
  fi
done
if [[ $failed -ne 0 ]]; then
  echo "(regenerate: bash $0 MODEL_PAGE README... --write)" >&2
  exit 1
fi
