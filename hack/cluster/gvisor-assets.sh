#!/usr/bin/env bash
# Finds or builds gVisor for the test cluster (hack/cluster/up.sh's RuntimeClass `gvisor`) and
# prints its directory as the last line of stdout; everything else goes to stderr. The
# directory holds
#   - runsc, gVisor's OCI runtime (gvisor.dev/gvisor/runsc), and
#   - containerd-shim-runsc-v1, its containerd shim (gvisor.dev/gvisor/shim),
# both from the Go module proxy at the Makefile's CLUSTER_GVISOR_VERSION (a pseudo-version of
# gVisor's "go" branch, the layout that builds with plain `go build`).
#
# The shim is written for containerd 2; the cluster runs Debian's containerd 1.6. Two patches,
# applied to copies of the module sources in the build directory (never the module cache):
#   1. gvisor.dev/gvisor pkg/shim/v1/manager.go: the shim lowers its own oom_score_adj to -999
#      and fails the start when it cannot. Nothing here may lower an oom_score_adj (no
#      CAP_SYS_RESOURCE; the reason up.sh sets containerd's restrict_oom_score_adj for runc),
#      so a failure is ignored and the shim keeps containerd's score. Silently: containerd 1.6
#      reads the start's stdout and stderr together as the shim's address.
#   2. github.com/containerd/containerd/v2 pkg/shim/shim.go: `shim start` prints its bootstrap
#      parameters as JSON ({"version":2,"address":...,"protocol":"ttrpc"}), which containerd
#      1.7 and later parse; 1.6 reads the output as the bare socket address. The shim prints
#      the address alone (a ttrpc v2 shim, which is what 1.6 assumes).
# No option or environment variable of the shim turns either off.
#
# Cached in ${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/cluster/gvisor-<version>-<hash of
# this script>/; a cold build takes about 4.5 minutes on 2 cores.
#
# Environment: CLUSTER_GVISOR_VERSION overrides the Makefile's pin; CLUSTER_ASSETS_FORCE=1
# rebuilds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

makefile=$repo/Makefile
pinned() { sed -n "s/^$1[[:space:]]*?=[[:space:]]*\([^[:space:]]*\).*/\1/p" "$makefile"; }
GVISOR_VERSION=${CLUSTER_GVISOR_VERSION:-$(pinned CLUSTER_GVISOR_VERSION)}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/cluster
# This script (with its patches) is part of the key, so an edit to it rebuilds.
script_hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
ASSETS_DIR=$CACHE_ROOT/gvisor-$GVISOR_VERSION-$script_hash

log() { printf 'gvisor-assets: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
[[ $GVISOR_VERSION =~ ^v0\.0\.0-[0-9]{14}-[0-9a-f]{12}$ ]] ||
  die "gVisor version '$GVISOR_VERSION': want a pseudo-version of gvisor.dev/gvisor such as v0.0.0-20260905035102-160fafc42237 (CLUSTER_GVISOR_VERSION)"

# works DIR: both binaries are there and runsc reports the pinned version.
works() {
  local dir=$1 out
  [ -x "$dir/runsc" ] && [ -x "$dir/containerd-shim-runsc-v1" ] || return 1
  out=$(timeout 30 "$dir/runsc" --version 2>&1) || return 1
  grep -q "^runsc version $GVISOR_VERSION\$" <<<"$out" || return 1
}

found() { log "using $1 ($2)"; printf '%s\n' "$1"; exit 0; }

if [ -z "${CLUSTER_ASSETS_FORCE:-}" ] && works "$ASSETS_DIR"; then found "$ASSETS_DIR" cache; fi
command -v go >/dev/null || die "go is not on PATH: it is needed to build gVisor"

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.gvisor.lock"
if ! flock -n 9; then log "another build is running; waiting for it"; flock 9; fi
if [ -z "${CLUSTER_ASSETS_FORCE:-}" ] && works "$ASSETS_DIR"; then found "$ASSETS_DIR" "cache, built by another run"; fi

work=$(mktemp -d "$CACHE_ROOT/.build-gvisor.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -buildvcs=false" GOWORK=off
start=$SECONDS

# moddir MODULE@VERSION: the module's directory in the module cache (downloaded if need be).
moddir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
# patch FILE OLD NEW: replaces the one line that contains OLD (a fixed string) with NEW;
# fails when OLD is not on exactly one line (a new gVisor or containerd moved the code).
patch_line() {
  local file=$1 old=$2 new=$3 n
  n=$(grep -cF -- "$old" "$file" || true)
  [ "$n" = 1 ] || die "patch: '$old' is on $n lines of $file, not 1; see the patches at the top of $0"
  OLD=$old NEW=$new awk 'index($0, ENVIRON["OLD"]) { print ENVIRON["NEW"]; next } { print }' "$file" >"$file.new"
  mv "$file.new" "$file"
}

log "downloading gvisor.dev/gvisor@$GVISOR_VERSION"
gvisor_src=$(cd "$work" && moddir "gvisor.dev/gvisor@$GVISOR_VERSION")
[ -f "$gvisor_src/go.mod" ] || die "go mod download gvisor.dev/gvisor@$GVISOR_VERSION gave no module directory"
containerd_version=$(sed -n 's|^[[:space:]]*github.com/containerd/containerd/v2 \(v[^[:space:]]*\).*|\1|p' "$gvisor_src/go.mod")
[ -n "$containerd_version" ] || die "gvisor.dev/gvisor@$GVISOR_VERSION does not require github.com/containerd/containerd/v2"
containerd_src=$(cd "$work" && moddir "github.com/containerd/containerd/v2@$containerd_version")
[ -f "$containerd_src/go.mod" ] || die "go mod download github.com/containerd/containerd/v2@$containerd_version gave no module directory"
cp -r "$gvisor_src" "$work/gvisor"
cp -r "$containerd_src" "$work/containerd"
chmod -R u+w "$work/gvisor" "$work/containerd"

# Patch 1 (see the top): the shim's OOM score.
patch_line "$work/gvisor/pkg/shim/v1/manager.go" \
  'return shim.BootstrapParams{}, fmt.Errorf("failed to set OOM Score on shim: %w", err)' \
  '		_ = err // managed-agents test cluster patch: the shim keeps its score (nothing may go to stderr, see below)'
# Patch 2 (see the top): the bare address for containerd 1.6.
patch_line "$work/containerd/pkg/shim/shim.go" \
  'data, err := json.Marshal(&params)' \
  '		data, err := []byte(params.Address), error(nil) // managed-agents test cluster patch: containerd 1.6 reads the bare address
		_ = json.Marshal // (the file'"'"'s only use of encoding/json)'

mkdir -p "$work/m"
go_directive=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gvisor_src/go.mod")
cat >"$work/m/go.mod" <<EOF
module cluster-assets/gvisor

go $go_directive

require gvisor.dev/gvisor $GVISOR_VERSION

replace (
	gvisor.dev/gvisor => ../gvisor
	github.com/containerd/containerd/v2 => ../containerd
)
EOF
log "building runsc and containerd-shim-runsc-v1 (containerd $containerd_version's shim library)"
(cd "$work/m" && go build -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" -o "$out/runsc" gvisor.dev/gvisor/runsc &&
  go build -ldflags "-s -w" -o "$out/containerd-shim-runsc-v1" gvisor.dev/gvisor/shim)

works "$out" || die "the built runsc does not report $GVISOR_VERSION; see $out"
rm -rf "$ASSETS_DIR.old"
[ ! -e "$ASSETS_DIR" ] || mv "$ASSETS_DIR" "$ASSETS_DIR.old"
mv "$out" "$ASSETS_DIR"
rm -rf "$ASSETS_DIR.old"
log "built in $((SECONDS - start))s"
found "$ASSETS_DIR" built
