# Sourced by the docs tests that compare a page's code with docs/examples/snippets.cpp.
#   snippet_region SNIPPETS NAME        the lines between the two "//! [NAME]" markers
#   fenced_block PAGE HEADING LANG      the first ```LANG block under the "## HEADING..." section
snippet_region() {
  awk -v name="$2" '$0 == "//! [" name "]" {inside = !inside; next} inside {print}' "$1"
}
fenced_block() {
  awk -v heading="## $2" -v fence="\`\`\`$3" '
    index($0, heading) == 1 {section = 1; next}
    section && /^## / {exit}
    section && !inside && $0 == fence {inside = 1; next}
    inside && /^```/ {exit}
    inside {print}' "$1"
}
