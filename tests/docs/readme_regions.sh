# Sourced by the lessons' README-figure checks (tests/docs/lessonN_readme_figures.sh):
# the figures of a README live between <!-- figures:NAME --> and
# <!-- /figures:NAME -->, and these read and rewrite them in "$readme".
# A region's figures are fenced (```) by replace_region unless the sourcing
# script sets fence=no (then the script's own lines are the region, fences and all).

# The lines of region $1, its fences left out (with fence=no, whatever is there).
region() {
  awk -v open="<!-- figures:$1 -->" -v closing="<!-- /figures:$1 -->" -v fence="${fence:-yes}" '
    $0 == closing {inside = 0}
    inside && (fence == "no" || $0 !~ /^```/) {print}
    $0 == open {inside = 1}' "$readme"
}

# Region $1 becomes the lines of file $2 (in a fence unless fence=no).
replace_region() {
  awk -v open="<!-- figures:$1 -->" -v closing="<!-- /figures:$1 -->" -v file="$2" -v fence="${fence:-yes}" '
    $0 == open {
      print
      if (fence != "no") print "```"
      while ((getline text < file) > 0) print text
      if (fence != "no") print "```"
      skip = 1
      next
    }
    $0 == closing {skip = 0}
    !skip {print}' "$readme" >"$readme.new"
  mv "$readme.new" "$readme"
}

# check_region NAME FILE WHAT: with write=--write, region NAME becomes the lines of FILE first;
# then the region must equal them. Prints "NAME: N lines match WHAT", or, on stderr, the
# difference (< expected, > README), and sets failed=1. FILE empty is a failure of its own.
check_region() {
  if [[ ! -s "$2" ]]; then
    echo "FAILED: nothing was made for the $1 figures ($3 printed nothing)" >&2
    failed=1
    return
  fi
  if [[ "${write:-}" == "--write" ]]; then replace_region "$1" "$2"; fi
  region "$1" >"$2.readme"
  if ! diff -q "$2" "$2.readme" >/dev/null; then
    echo "FAILED: $readme's $1 figures differ from $3 (< expected, > README):" >&2
    diff "$2" "$2.readme" | sed 's/^/    /' >&2 || true
    failed=1
  else
    echo "$1: $(wc -l <"$2") lines match $3"
  fi
}

# regions_done HOW: after the check_region calls, exit 1 with how to regenerate if any failed.
regions_done() {
  if [[ ${failed:-0} -ne 0 ]]; then
    echo "(regenerate: $1)" >&2
    exit 1
  fi
}
