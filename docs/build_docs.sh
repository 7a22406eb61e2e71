#!/usr/bin/env bash
# Builds the Doxygen site (docs/Doxyfile) and sorts its warnings.
#
#   docs/build_docs.sh [--output DIR] [--strict]
#
# DIR defaults to build/docs (the site is DIR/html/index.html, the warnings
# DIR/warnings.log). Diagrams are drawn when graphviz's `dot` is installed.
# --strict (the test docs.doxygen): exit 1 when Doxygen warns about a public
# header (framework/include, grader/harness) or a page of docs/, since every
# public declaration is documented and every link and command in the pages must
# resolve; warnings about other pages are listed but do not fail.
# Exit status: 0 built, 1 failed, 77 Doxygen is not installed (CTest: skipped).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=build/docs
strict=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --output) out=${2:?--output needs a folder}; shift 2 ;;
    --strict) strict=1; shift ;;
    *) echo "build_docs.sh: unknown argument '$1' (use --output DIR, --strict)" >&2; exit 2 ;;
  esac
done

if ! command -v doxygen >/dev/null 2>&1; then
  echo "SKIPPED: doxygen is not installed; './workbook docs' installs it (Debian packages doxygen graphviz)"
  exit 77
fi
have_dot=YES
if ! command -v dot >/dev/null 2>&1; then
  have_dot=NO
  echo "note: graphviz's dot is not installed: the site is built without its diagrams (apt-get install graphviz)"
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/warnings.log"
rm -f "$log"
start=$SECONDS
{
  cat docs/Doxyfile
  printf 'OUTPUT_DIRECTORY = "%s"\nWARN_LOGFILE = "%s"\nHAVE_DOT = %s\n' "$out" "$log" "$have_dot"
} | doxygen - || { echo "doxygen failed (exit status $?)" >&2; exit 1; }

touch "$log"
total=$(grep -c 'warning:' "$log" || true)
# Warnings about the public headers and docs/ pages; anything else is a note.
# Without graphviz the \dot drawings are left out on purpose (said above).
own=$(grep -E "^($root/)?(framework/include|grader/harness|docs)/[^:]*:[0-9]+: warning:" "$log" \
        | grep -v 'ignoring \\dot command because HAVE_DOT is not set' || true)
own_count=0
if [[ -n "$own" ]]; then own_count=$(printf '%s\n' "$own" | wc -l); fi
echo "doxygen $(doxygen --version | head -1), diagrams: $have_dot, $((SECONDS - start)) s"
echo "site: $out/html/index.html"
echo "warnings: $total in all, $own_count about the public headers or docs/ ($log)"
if [[ "$total" -gt 0 ]]; then
  sed 's/^/  /' "$log" | head -50
fi
if [[ $strict -eq 1 && $own_count -gt 0 ]]; then
  echo "FAILED: document every public declaration and fix the docs/ pages (the warnings above)" >&2
  exit 1
fi
exit 0
