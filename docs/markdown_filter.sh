#!/bin/sh
# Doxygen's input filter for the Markdown pages (FILTER_PATTERNS in docs/Doxyfile):
# prints the page given as $1 as Doxygen 1.9 should read it. The pages are
# written for GitHub and stay unchanged on disk; two things change on the fly:
#
# - <details><summary>...</summary> ... </details> (the lessons' quiz answers):
#   Doxygen 1.9.4 splits such a block apart, so its tags are passed through as
#   raw HTML blocks (\htmlonly[block]) and the Markdown inside renders as usual.
# - lessons/README.md: a \subpage line is appended for every lessons/N_name/README.md,
#   in lesson order, so the site shows each lesson as a page under "Lessons", in
#   order, including lessons added later (Doxygen names a Markdown page
#   md_<path with / as _>, e.g. md_lessons_1_device_check_README).
set -eu
page=$1

awk '
  function raw(html) { print ""; print "\\htmlonly[block]" html "\\endhtmlonly"; print "" }
  # <details> alone or followed by its <summary> on the same line
  /^[ \t]*<details>/ {
    line = $0
    sub(/^[ \t]*<details>[ \t]*/, "", line)
    if (line == "") { pending = 1; next }
    raw("<details>" line); next
  }
  pending && /^[ \t]*<summary>/ { pending = 0; sub(/^[ \t]*/, ""); raw("<details>" $0); next }
  pending { pending = 0; raw("<details>") }
  /^[ \t]*<\/details>[ \t]*$/ { raw("</details>"); next }
  { print }
  END { if (pending) raw("<details>") }
' "$page"

case "$page" in
  lessons/README.md | */lessons/README.md)
    dir=$(dirname "$page")
    printf '\n## The lesson pages, in order\n\n'
    for readme in $(ls -d "$dir"/[0-9]*_*/README.md 2>/dev/null | sort -V); do
      folder=$(basename "$(dirname "$readme")")
      printf -- '- \\subpage md_lessons_%s_README\n' "$folder"
    done
    ;;
esac
