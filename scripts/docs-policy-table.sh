#!/usr/bin/env bash
# Writes `retain policies --markdown` into a markdown file (docs/evaluation.md) between its
# markers, or with --check fails when the file's table differs from what the registry generates.
# Usage: scripts/docs-policy-table.sh RETAIN_BINARY docs/evaluation.md [--check]
set -euo pipefail
retain=$1 readme=$2 mode=${3:-write}
begin='<!-- retain policies --markdown: begin -->'
end='<!-- retain policies --markdown: end -->'
grep -qxF "$begin" "$readme" && grep -qxF "$end" "$readme" ||
  { echo "$readme: the markers '$begin' / '$end' are missing" >&2; exit 1; }
table=$(mktemp) updated=$(mktemp)
trap 'rm -f "$table" "$updated"' EXIT
"$retain" policies --markdown >"$table"
awk -v begin="$begin" -v end="$end" -v table="$table" '
  $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }' "$readme" >"$updated"
if [[ $mode == --check ]]; then
  diff -u "$readme" "$updated" >&2 ||
    { echo "the policy table is stale: run scripts/docs-policy-table.sh $retain $readme" >&2; exit 1; }
else
  cp "$updated" "$readme"
fi
