#!/usr/bin/env bash
# README.md cannot include a file, so its "A first look at `tiny`" code block is
# checked here against the compiled snippets it shows:
#   readme_first_look.sh README.md docs/examples/snippets.cpp
# The block must be the region first_look_head, a blank line, then first_look.
set -euo pipefail
readme=$1 snippets=$2

source "$(dirname "${BASH_SOURCE[0]}")/snippet_blocks.sh"
block=$(fenced_block "$readme" "A first look" cpp)
expected="$(snippet_region "$snippets" first_look_head)

$(snippet_region "$snippets" first_look)"

if [[ -z "$block" ]]; then
  echo "FAILED: no \`\`\`cpp block under '## A first look' in $readme" >&2
  exit 1
fi
if [[ "$block" != "$expected" ]]; then
  echo "FAILED: README.md's first-look code differs from the compiled snippets in $snippets" >&2
  echo "(update one to match the other; the snippets are the ones the build compiles and runs)" >&2
  diff <(printf '%s\n' "$expected") <(printf '%s\n' "$block") | sed 's/^</snippets:/; s/^>/README:  /' >&2 || true
  exit 1
fi
echo "README.md's first-look block is the compiled snippet ($(printf '%s\n' "$block" | wc -l) lines)"
