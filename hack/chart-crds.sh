#!/usr/bin/env bash
# Copies what controller-gen generates into the Helm chart, which cannot reach files outside
# its directory: the CRDs (config/crd/bases/*.yaml → charts/managed-agents/crds/) and the
# controller's RBAC rules (config/rbac/role.yaml → charts/managed-agents/files/rbac/role.yaml,
# read by templates/controller-rbac.yaml). The copies are exact: files the source no longer
# has are removed.
#
# Usage: hack/chart-crds.sh           update the chart (make chart-crds)
#        hack/chart-crds.sh --check   fail, naming the files, when the chart's copies are stale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CHART=charts/managed-agents
check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# sync SRC_DIR GLOB DST_DIR: make DST_DIR hold exactly the files of SRC_DIR matching GLOB.
# With --check, report instead of changing anything.
stale=0
sync() {
  local src=$1 glob=$2 dst=$3 f name
  shopt -s nullglob
  local want=() have=()
  [ -d "$src" ] && want=("$src"/$glob)
  [ -d "$dst" ] && have=("$dst"/$glob)
  shopt -u nullglob
  for f in "${want[@]}"; do
    [ -f "$f" ] || continue # a glob without wildcards stays as it is when nothing matches
    name=$(basename "$f")
    if ! cmp -s "$f" "$dst/$name"; then
      if $check; then echo "stale: $dst/$name differs from $f" >&2; stale=1
      else mkdir -p "$dst"; cp "$f" "$dst/$name"; echo "copied $f → $dst/$name"; fi
    fi
  done
  for f in "${have[@]}"; do
    [ -f "$f" ] || continue
    name=$(basename "$f")
    if [ ! -f "$src/$name" ]; then
      if $check; then echo "stale: $f has no source $src/$name" >&2; stale=1
      else rm "$f"; echo "removed $f"; fi
    fi
  done
}

sync config/crd/bases '*.yaml' "$CHART/crds"
sync config/rbac 'role.yaml' "$CHART/files/rbac"

if [ "$stale" -ne 0 ]; then
  echo "the chart's copies of config/ are stale: run make chart-crds" >&2
  exit 1
fi
