#!/usr/bin/env bash
# Writes a table that retain generates (the policies, the recipe keys) into a markdown file
# between the markers `<!-- NAME: begin -->` and `<!-- NAME: end -->`, or with --check fails when
# the file's table differs from what the code generates, so the docs cannot drift.
# Usage: scripts/docs-table.sh FILE NAME write|--check -- COMMAND [ARGS...]
#   e.g. scripts/docs-table.sh docs/evaluation.md "retain policies --markdown" write -- build/retain policies --markdown
set -euo pipefail
file=$1 name=$2 mode=$3
shift 3
[[ ${1:-} == -- ]] || { echo "usage: $0 FILE NAME write|--check -- COMMAND [ARGS...]" >&2; exit 2; }
shift
begin="<!-- $name: begin -->"
end="<!-- $name: end -->"
grep -qxF "$begin" "$file" && grep -qxF "$end" "$file" ||
  { echo "$file: the markers '$begin' / '$end' are missing" >&2; exit 1; }
table=$(mktemp) updated=$(mktemp)
trap 'rm -f "$table" "$updated"' EXIT
"$@" >"$table"
awk -v begin="$begin" -v end="$end" -v table="$table" '
  $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }' "$file" >"$updated"
if [[ $mode == --check ]]; then
  diff -u "$file" "$updated" >&2 ||
    { echo "$file: the '$name' table is stale: run scripts/docs-table.sh $file \"$name\" write -- $*" >&2; exit 1; }
else
  cp "$updated" "$file"
fi
