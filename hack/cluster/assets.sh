#!/usr/bin/env bash
# Finds or builds the binaries of the test cluster (make test-cluster) and prints their
# directory as the last line of stdout; everything else goes to stderr.
#
# The node's programs come from the Go module proxy, as the envtest assets do
# (hack/envtest-assets.sh, whose kube-apiserver, etcd and kubectl the cluster reuses):
#   - kubelet, kube-controller-manager, kube-scheduler, kube-proxy of the same Kubernetes
#     release, built in a wrapper module that replaces the staging modules with their
#     released versions (k8s.io/kubernetes's own go.mod points them at ./staging);
#   - coredns (cluster DNS) and kube-router, whose network policy controller is the cluster's
#     NetworkPolicy engine (iptables and ipset; only that controller runs). Not
#     sigs.k8s.io/kube-network-policies: it needs nftables' queue expression, which this
#     kernel lacks and no module can be loaded here;
#   - agent-sandbox-controller, kubernetes-sigs/agent-sandbox's controller (with its extensions:
#     Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool), which the SandboxBinding
#     controller provisions sandboxes through, and that module's CRDs (k8s/crds/*.yaml, copied
#     into agent-sandbox-crds/);
#   - pause, hack/cluster/pause, the pod sandbox process.
# Containerd, runc and the CNI plugins are Debian's packages (hack/cluster/up.sh).
#
# Cached in ${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/cluster/<versions>/; a cold build
# takes about 10 minutes on 2 cores when the envtest build has filled Go's build cache (agent-
# sandbox's controller is about 2 of them).
#
# Environment: CLUSTER_K8S_VERSION, CLUSTER_COREDNS_VERSION, CLUSTER_KUBE_ROUTER_VERSION,
# CLUSTER_AGENT_SANDBOX_VERSION override the Makefile's pins; CLUSTER_ASSETS_FORCE=1 rebuilds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

makefile=$repo/Makefile
pinned() { sed -n "s/^$1[[:space:]]*?=[[:space:]]*\([^[:space:]]*\).*/\1/p" "$makefile"; }
K8S_VERSION=${CLUSTER_K8S_VERSION:-$(pinned ENVTEST_K8S_VERSION)}
COREDNS_VERSION=${CLUSTER_COREDNS_VERSION:-$(pinned CLUSTER_COREDNS_VERSION)}
KUBE_ROUTER_VERSION=${CLUSTER_KUBE_ROUTER_VERSION:-$(pinned CLUSTER_KUBE_ROUTER_VERSION)}
AGENT_SANDBOX_VERSION=${CLUSTER_AGENT_SANDBOX_VERSION:-$(pinned CLUSTER_AGENT_SANDBOX_VERSION)}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/cluster
# The pause source is part of the key, so an edit to it rebuilds.
pause_hash=$(sha256sum "$repo/hack/cluster/pause/main.go" | cut -c1-12)
ASSETS_DIR=$CACHE_ROOT/k8s-$K8S_VERSION-coredns-$COREDNS_VERSION-kube-router-$KUBE_ROUTER_VERSION-agent-sandbox-$AGENT_SANDBOX_VERSION-pause-$pause_hash

log() { printf 'cluster-assets: %s\n' "$*" >&2; }
# shellcheck source=hack/lib/kubernetes-module.sh
. "$repo/hack/lib/kubernetes-module.sh"
die() { log "$*"; exit 1; }

[[ $K8S_VERSION =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "Kubernetes version $K8S_VERSION: want a release such as v1.37.2"
if [ -z "$COREDNS_VERSION" ] || [ -z "$KUBE_ROUTER_VERSION" ] || [ -z "$AGENT_SANDBOX_VERSION" ]; then
  die "CLUSTER_COREDNS_VERSION, CLUSTER_KUBE_ROUTER_VERSION and CLUSTER_AGENT_SANDBOX_VERSION must be pinned in the Makefile"
fi

BINARIES=(kubelet kube-controller-manager kube-scheduler kube-proxy coredns kube-router agent-sandbox-controller pause)
AGENT_SANDBOX_MODULE=sigs.k8s.io/agent-sandbox
# The version the agent-sandbox build stamps (its own Makefile and Dockerfile set the same variable).
AGENT_SANDBOX_LDFLAGS="-s -w -X $AGENT_SANDBOX_MODULE/internal/version.gitVersion=$AGENT_SANDBOX_VERSION"

# works DIR: every binary is there, the Kubernetes ones, CoreDNS and agent-sandbox's report the
# pinned releases, and agent-sandbox's CRDs are there.
works() {
  local dir=$1 bin out
  for bin in "${BINARIES[@]}"; do [ -x "$dir/$bin" ] || return 1; done
  for bin in kubelet kube-controller-manager kube-scheduler kube-proxy; do
    out=$(timeout 30 "$dir/$bin" --version 2>&1) || return 1
    [ "$out" = "Kubernetes $K8S_VERSION" ] || return 1
  done
  out=$(timeout 30 "$dir/coredns" -version 2>&1) || return 1
  grep -q "CoreDNS-${COREDNS_VERSION#v}" <<<"$out" || return 1
  out=$(timeout 30 "$dir/agent-sandbox-controller" --version 2>&1) || return 1
  grep -q "^agent-sandbox-controller, version $AGENT_SANDBOX_VERSION " <<<"$out" || return 1
  [ -f "$dir/agent-sandbox-crds/agents.x-k8s.io_sandboxes.yaml" ] || return 1
  [ -f "$dir/agent-sandbox-crds/extensions.agents.x-k8s.io_sandboxclaims.yaml" ] || return 1
}

found() { log "using $1 ($2)"; printf '%s\n' "$1"; exit 0; }

if [ -z "${CLUSTER_ASSETS_FORCE:-}" ] && works "$ASSETS_DIR"; then found "$ASSETS_DIR" cache; fi
command -v go >/dev/null || die "go is not on PATH: it is needed to build the cluster"

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.lock"
if ! flock -n 9; then log "another build is running; waiting for it"; flock 9; fi
if [ -z "${CLUSTER_ASSETS_FORCE:-}" ] && works "$ASSETS_DIR"; then found "$ASSETS_DIR" "cache, built by another run"; fi

work=$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out"
# Static, reproducible binaries; the same flags as hack/envtest-assets.sh, so the packages it
# compiled for kube-apiserver come from Go's build cache.
export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -buildvcs=false" GOWORK=off
start=$SECONDS

# --- Kubernetes node and control-plane binaries -------------------------------------------------
log "downloading k8s.io/kubernetes@$K8S_VERSION"
(cd "$work" && kubernetes_wrapper "$work/k8s" cluster-assets/kubernetes "$K8S_VERSION")
k8s_ldflags=$(kubernetes_ldflags "$K8S_VERSION")
log "building kubelet, kube-controller-manager, kube-scheduler, kube-proxy $K8S_VERSION"
(cd "$work/k8s" && go build -ldflags "$k8s_ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy)

# --- CoreDNS and kube-router (no replace directives: go install works) --------------------------
log "building coredns $COREDNS_VERSION"
(cd "$work" && GOBIN="$work/gobin" go install -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION")
mv "$work/gobin/coredns" "$out/coredns"
log "building kube-router $KUBE_ROUTER_VERSION"
(cd "$work" && GOBIN="$work/gobin" go install -ldflags "-s -w" "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION")
mv "$work/gobin/kube-router" "$out/kube-router"

# --- agent-sandbox: its controller and CRDs ---------------------------------------------------------
log "building agent-sandbox-controller $AGENT_SANDBOX_VERSION"
(cd "$work" && GOBIN="$work/gobin" go install -ldflags "$AGENT_SANDBOX_LDFLAGS" \
  "$AGENT_SANDBOX_MODULE/cmd/agent-sandbox-controller@$AGENT_SANDBOX_VERSION")
mv "$work/gobin/agent-sandbox-controller" "$out/agent-sandbox-controller"
as_dir=$(cd "$work" && go mod download -json "$AGENT_SANDBOX_MODULE@$AGENT_SANDBOX_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$as_dir" ] || ! compgen -G "$as_dir/k8s/crds/*.yaml" >/dev/null; then
  die "$AGENT_SANDBOX_MODULE@$AGENT_SANDBOX_VERSION: no k8s/crds/*.yaml in the module"
fi
mkdir -p "$out/agent-sandbox-crds"
# The module cache's files are read-only; the copies need not be.
install -m 0644 "$as_dir"/k8s/crds/*.yaml "$out/agent-sandbox-crds/"

# --- pause ----------------------------------------------------------------------------------------
# -mod=readonly: inside the repository, a build must never rewrite its go.mod or go.sum.
(cd "$repo" && GOFLAGS="-mod=readonly -trimpath -buildvcs=false" go build -ldflags "-s -w" -o "$out/pause" ./hack/cluster/pause)

works "$out" || die "the built binaries do not report the pinned versions; see $out"
rm -rf "$ASSETS_DIR.old"
[ ! -e "$ASSETS_DIR" ] || mv "$ASSETS_DIR" "$ASSETS_DIR.old"
mv "$out" "$ASSETS_DIR"
rm -rf "$ASSETS_DIR.old"
log "built in $((SECONDS - start))s"
found "$ASSETS_DIR" built
