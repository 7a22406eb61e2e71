#!/usr/bin/env bash
# The docs/ pages show their C++ as plain ```cpp blocks (so that they read well
# on GitHub) copied from docs/examples/snippets.cpp, which the build compiles and
# docs.snippets runs. This test keeps the copies honest:
#   pages_match_snippets.sh docs/examples/snippets.cpp docs    (a folder: its *.md)
# A page that names snippets.cpp copies from it: each of its ```cpp blocks must
# be, line for line, one region of snippets.cpp (between `//! [name]` markers)
# or several regions one after another, separated by one blank line. Pages that
# do not name the file are left alone. Exit status 1 names each block that
# differs (page, line, first line of code) and shows its difference from the
# regions it was most likely copied from.
set -euo pipefail
snippets=$1
shift
pages=()
for arg in "$@"; do
  if [[ -d "$arg" ]]; then pages+=("$arg"/*.md); else pages+=("$arg"); fi
done

checked=0
failed=0
for page in "${pages[@]}"; do
  grep -q 'snippets\.cpp' "$page" || continue
  checked=$((checked + 1))
  # One report line per block: "ok LINE REGIONS" or "differs LINE NEAREST",
  # then, for a block that differs, its lines and the nearest region's,
  # prefixed "block:" and "region:", for the diff below.
  report=$(awk -v snippets_file="$snippets" '
    function load_regions(   line, name, inside) {
      while ((getline line < snippets_file) > 0) {
        if (line ~ /^\/\/! \[[A-Za-z0-9_]+\]$/) {
          name = substr(line, 6, length(line) - 6)
          if (inside == "") { inside = name; nregions++; rname[nregions] = name; rlen[nregions] = 0 }
          else inside = ""
          continue
        }
        if (inside != "") rline[nregions, ++rlen[nregions]] = line
      }
      close(snippets_file)
    }
    # True when block lines pos..n are regions separated by blank lines;
    # "used" gets their names.
    function matches_from(pos,   r, k, end, ok) {
      if (pos > n) return 1
      for (r = 1; r <= nregions; r++) {
        end = pos + rlen[r] - 1
        if (end > n) continue
        ok = 1
        for (k = 1; k <= rlen[r] && ok; k++) if (block[pos + k - 1] != rline[r, k]) ok = 0
        if (!ok) continue
        if (end == n || (block[end + 1] == "" && matches_from(end + 2))) {
          used = rname[r] (used == "" ? "" : " + " used)
          return 1
        }
      }
      return 0
    }
    # What the block was most likely copied from: the regions with at least half
    # of their lines in it, in the order they appear there (else the one region
    # sharing the most lines). Sets "near" (names) and "expected" (lines, ne).
    function nearest(   r, k, j, in_block, common, total, first, picked, at, np, t, best, best_common) {
      for (j = 1; j <= n; j++) if (block[j] != "" && !(block[j] in in_block)) in_block[block[j]] = j
      np = 0; best = 1; best_common = -1
      for (r = 1; r <= nregions; r++) {
        common = 0; total = 0; first = n + 1
        for (k = 1; k <= rlen[r]; k++) {
          if (rline[r, k] == "") continue
          total++
          if (rline[r, k] in in_block) { common++; if (in_block[rline[r, k]] < first) first = in_block[rline[r, k]] }
        }
        if (common > best_common) { best_common = common; best = r }
        if (common > 0 && 2 * common >= total) {
          for (t = ++np; t > 1 && at[t - 1] > first; t--) { picked[t] = picked[t - 1]; at[t] = at[t - 1] }
          picked[t] = r; at[t] = first
        }
      }
      near = ""; ne = 0
      if (best_common <= 0) { near = "none (no region shares a line with it)"; return }
      if (np == 0) { np = 1; picked[1] = best }
      for (t = 1; t <= np; t++) {
        r = picked[t]
        near = near (t > 1 ? " + " : "") rname[r]
        if (t > 1) expected[++ne] = ""
        for (k = 1; k <= rlen[r]; k++) expected[++ne] = rline[r, k]
      }
    }
    BEGIN { load_regions() }
    !inside && /^```cpp[ \t]*$/ { inside = 1; start = FNR + 1; n = 0; next }
    inside && /^```/ {
      inside = 0; used = ""
      if (nregions > 0 && matches_from(1)) { print "ok " start " " used; next }
      nearest()
      print "differs " start " " near
      for (k = 1; k <= n; k++) print "block:" block[k]
      for (k = 1; k <= ne; k++) print "region:" expected[k]
      next
    }
    inside { block[++n] = $0 }
  ' "$page")

  blocks=0
  while IFS= read -r line; do
    case "$line" in
      "ok "*)
        read -r _ at regions <<<"$line"
        blocks=$((blocks + 1))
        echo "$page:$at: the block is $regions" ;;
      "differs "*)
        read -r _ at regions <<<"$line"
        blocks=$((blocks + 1))
        failed=$((failed + 1))
        first=$(sed -n "${at}p" "$page")
        echo "FAILED: $page:$at: the \`\`\`cpp block starting '$first' is not a copy of the regions of $snippets" >&2
        echo "  (change the page and the file together; the file is the code that is compiled and run)" >&2
        echo "  against its nearest regions, $regions (< snippets.cpp, > $page):" >&2
        diff <(printf '%s\n' "$report" | awk -v at="$at" '
                 /^(ok|differs) / {split($0, f, " "); mine = (f[2] == at); next}
                 mine && sub(/^region:/, "")') \
             <(printf '%s\n' "$report" | awk -v at="$at" '
                 /^(ok|differs) / {split($0, f, " "); mine = (f[2] == at); next}
                 mine && sub(/^block:/, "")') | sed 's/^/    /' >&2 || true ;;
    esac
  done <<<"$report"
  if [[ $blocks -eq 0 ]]; then
    echo "FAILED: $page names snippets.cpp but has no \`\`\`cpp block to check" >&2
    failed=$((failed + 1))
  fi
done

if [[ $checked -eq 0 ]]; then
  echo "FAILED: no page among the ${#pages[@]} given names snippets.cpp: nothing was checked" >&2
  exit 1
fi
if [[ $failed -gt 0 ]]; then exit 1; fi
echo "every \`\`\`cpp block of the $checked page(s) that copy $snippets is a compiled region of it"
