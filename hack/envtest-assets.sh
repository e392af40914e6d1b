#!/usr/bin/env bash
# Finds or builds the envtest assets (kube-apiserver, etcd and kubectl) and prints their
# directory as the last line of stdout: the value of KUBEBUILDER_ASSETS for
# sigs.k8s.io/controller-runtime/pkg/envtest. Everything else goes to stderr.
#
# In order, the first that works wins:
#   1. KUBEBUILDER_ASSETS, when it names a directory whose three binaries run;
#   2. setup-envtest, when it is on PATH and gives such a directory for ENVTEST_K8S_VERSION;
#   3. the cache, ${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/envtest/k8s-<v>-etcd-<v>/;
#   4. a build from the Go module proxy into that cache (about 10 minutes on 2 cores).
#
# The setup-envtest download site is not always reachable, and `go install pkg@version` refuses
# k8s.io/kubernetes and go.etcd.io/etcd/server/v3 because their go.mod files carry replace
# directives. So each is built inside a throwaway wrapper module that requires it and replaces
# the modules it replaces with their released versions: every k8s.io staging module with the
# v0.<minor>.<patch> matching the Kubernetes release, the etcd submodules with etcd's version.
#
# Usage: hack/envtest-assets.sh
# Environment: ENVTEST_K8S_VERSION and ENVTEST_ETCD_VERSION override the versions pinned at the
# top of the Makefile; ENVTEST_ASSETS_FORCE=1 rebuilds even when the cache is current.
set -euo pipefail

# The versions are pinned in the Makefile only, so that a bump is one edit.
makefile=$(dirname "${BASH_SOURCE[0]}")/../Makefile
pinned() { sed -n "s/^$1[[:space:]]*?=[[:space:]]*\([^[:space:]]*\).*/\1/p" "$makefile"; }
K8S_VERSION=${ENVTEST_K8S_VERSION:-$(pinned ENVTEST_K8S_VERSION)}
ETCD_VERSION=${ENVTEST_ETCD_VERSION:-$(pinned ENVTEST_ETCD_VERSION)}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/envtest
ASSETS_DIR=$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION

log() { printf 'envtest-assets: %s\n' "$*" >&2; }
# shellcheck source=hack/lib/kubernetes-module.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/kubernetes-module.sh"
die() { log "$*"; exit 1; }

[[ $K8S_VERSION =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] ||
  die "ENVTEST_K8S_VERSION=$K8S_VERSION: want a release version such as v1.37.2"
# The staging modules (k8s.io/api, k8s.io/client-go, ...) of Kubernetes v1.X.Y are v0.X.Y.
K8S_MINOR=${BASH_REMATCH[1]}
STAGING_VERSION=v0.$K8S_MINOR.${BASH_REMATCH[2]}
[[ $ETCD_VERSION =~ ^v3\.[0-9]+\.[0-9]+$ ]] ||
  die "ENVTEST_ETCD_VERSION=$ETCD_VERSION: want a release version such as v3.6.16"

# works DIR [exact]: DIR holds kube-apiserver, etcd and kubectl that run. With "exact", they
# must also report the pinned versions (for the cache, which this script fills itself; a
# KUBEBUILDER_ASSETS chosen by the user may hold other versions on purpose).
works() {
  local dir=$1 exact=${2:-} out
  for bin in kube-apiserver etcd kubectl; do
    [ -x "$dir/$bin" ] || return 1
  done
  out=$(timeout 30 "$dir/kube-apiserver" --version 2>&1) || return 1
  [ -z "$exact" ] || [ "$out" = "Kubernetes $K8S_VERSION" ] || return 1
  out=$(timeout 30 "$dir/etcd" --version 2>&1) || return 1
  [ -z "$exact" ] || grep -qx "etcd Version: ${ETCD_VERSION#v}" <<<"$out" || return 1
  out=$(timeout 30 "$dir/kubectl" version --client 2>&1) || return 1
  [ -z "$exact" ] || grep -qx "Client Version: $K8S_VERSION" <<<"$out" || return 1
}

found() {
  log "using $1 ($2)"
  printf '%s\n' "$1"
  exit 0
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if works "$KUBEBUILDER_ASSETS"; then
    found "$KUBEBUILDER_ASSETS" "KUBEBUILDER_ASSETS"
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS does not hold working kube-apiserver, etcd and kubectl; looking elsewhere"
fi

if [ -z "${ENVTEST_ASSETS_FORCE:-}" ] && command -v setup-envtest >/dev/null; then
  # -i: installed versions only first (no network), then a download, each bounded in time.
  for flags in "-i" ""; do
    # shellcheck disable=SC2086 # $flags is empty or one flag.
    if dir=$(timeout 120 setup-envtest use $flags -p path "${K8S_VERSION#v}" 2>/dev/null) &&
      [ -n "$dir" ] && works "$dir"; then
      found "$dir" "setup-envtest"
    fi
  done
  log "setup-envtest gave no working assets for ${K8S_VERSION#v}; using the cache"
fi

if [ -z "${ENVTEST_ASSETS_FORCE:-}" ] && works "$ASSETS_DIR" exact; then
  found "$ASSETS_DIR" "cache"
fi

command -v go >/dev/null || die "go is not on PATH: it is needed to build the assets"

# Two test runs (or a developer and CI) may ask at the same time: one builds, the others wait
# and then find the cache current.
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.lock"
if ! flock -n 9; then
  log "another build is running; waiting for it"
  flock 9
fi
if [ -z "${ENVTEST_ASSETS_FORCE:-}" ] && works "$ASSETS_DIR" exact; then
  found "$ASSETS_DIR" "cache, built by another run"
fi

work=$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out"
# Outside any module: `go mod download` run inside this repository could touch its go.sum.
cd "$work"

# Builds are reproducible and small: no cgo (static binaries that run in any image), no local
# paths in the binaries, no VCS stamping (the wrapper has no repository).
export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -buildvcs=false" GOWORK=off

start=$SECONDS

# --- Kubernetes: kube-apiserver and kubectl ---------------------------------------------------
log "downloading k8s.io/kubernetes@$K8S_VERSION"
kubernetes_wrapper "$work/k8s" envtest-assets/kubernetes "$K8S_VERSION"
k8s_ldflags=$(kubernetes_ldflags "$K8S_VERSION")
log "building kube-apiserver and kubectl $K8S_VERSION (staging modules $STAGING_VERSION; ~10 minutes cold on 2 cores)"
(cd "$work/k8s" && go build -ldflags "$k8s_ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)

# --- etcd -------------------------------------------------------------------------------------
log "downloading go.etcd.io/etcd/server/v3@$ETCD_VERSION"
etcd_dir=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$etcd_dir/go.mod" ] || die "go mod download go.etcd.io/etcd/server/v3@$ETCD_VERSION gave no module directory"
# The etcd submodules the server module replaces with ../api and so on (the FORBIDDEN_DEPENDENCY
# ones are guards that nothing requires).
mapfile -t etcd_mods < <(sed -n 's|^[[:space:]]*\(go\.etcd\.io/etcd/[^[:space:]]*\) => \.\./.*|\1|p' "$etcd_dir/go.mod")
[ ${#etcd_mods[@]} -gt 0 ] || die "found no replace directives in go.etcd.io/etcd/server/v3@$ETCD_VERSION's go.mod"
go_directive=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$etcd_dir/go.mod")

mkdir -p "$work/etcd"
{
  echo "module envtest-assets/etcd"
  echo
  echo "go $go_directive"
  echo
  echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  echo
  echo "replace ("
  for m in "${etcd_mods[@]}"; do echo "	$m => $m $ETCD_VERSION"; done
  echo ")"
} >"$work/etcd/go.mod"
log "building etcd $ETCD_VERSION"
# The server module's main package is its root; the binary would be named v3 without -o.
(cd "$work/etcd" && go build -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)

works "$out" exact || die "the built binaries do not report $K8S_VERSION / $ETCD_VERSION; see $out"

# Replace the cache directory in one rename so no reader ever sees half of it.
rm -rf "$ASSETS_DIR.old"
[ ! -e "$ASSETS_DIR" ] || mv "$ASSETS_DIR" "$ASSETS_DIR.old"
mv "$out" "$ASSETS_DIR"
rm -rf "$ASSETS_DIR.old"
log "built in $((SECONDS - start))s"
found "$ASSETS_DIR" "built"
