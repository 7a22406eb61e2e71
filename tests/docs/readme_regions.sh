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
