#!/usr/bin/env bash
# Runs the commands of docs/getting_started.md's "Your own program" on the
# first-look code, in a folder laid out as the repository (its framework/
# headers, and build/default/framework as the library the tests were built
# with), and checks that the program starts and prints the loss:
#   own_program.sh docs/getting_started.md docs/examples/snippets.cpp REPO BUILD_FRAMEWORK_DIR
set -euo pipefail
page=$1 snippets=$2 repo=$3 libdir=$4

command -v g++ >/dev/null || { echo "SKIPPED: no g++ on PATH (the page's command uses it)"; exit 77; }

source "$(dirname "${BASH_SOURCE[0]}")/snippet_blocks.sh"
block=$(fenced_block "$page" "Your own program" sh)
[[ -n "$block" ]] || { echo "FAILED: no \`\`\`sh block under '## Your own program' in $page" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build/default"
ln -s "$repo/framework" "$work/framework"
ln -s "$libdir" "$work/build/default/framework"
{
  snippet_region "$snippets" first_look_head
  echo '#include <iostream>'
  echo 'int main() {'
  snippet_region "$snippets" first_look
  echo '}'
} > "$work/my_program.cpp"

cd "$work"
if ! output=$(bash -euo pipefail -c "$block" 2>&1); then
  echo "FAILED: the page's commands did not build and run the program:" >&2
  printf '%s\n' "$output" >&2
  exit 1
fi
printf '%s\n' "$output"
# The first look prints the loss and the gradient's width (784).
grep -Eq '^[0-9.]+ 784$' <<<"$output" || { echo "FAILED: the program did not print '<loss> 784'" >&2; exit 1; }
echo "the page's commands built and ran a program of its own against libtiny"
